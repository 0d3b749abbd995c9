// field_at: the field holding a byte of an object, of an array of the type, or none (padding).
#include <gtest/gtest.h>

#include "analysis/types.h"

namespace whymiss::analysis {
namespace {

DataType node() {
  // struct node { int key; /* 4 bytes padding */ double value; struct { char tag[3]; } meta; };
  DataType t{"struct node", 24, {{"key", 0, 4}, {"value", 8, 8}, {"meta.tag[]", 16, 3}}};
  return t;
}

TEST(FieldAt, NamesTheFieldHoldingTheByte) {
  DataType t = node();
  EXPECT_EQ(field_at(t, 0)->name, "key");
  EXPECT_EQ(field_at(t, 3)->name, "key");
  EXPECT_EQ(field_at(t, 8)->name, "value");
  EXPECT_EQ(field_at(t, 15)->name, "value");
  EXPECT_EQ(field_at(t, 18)->name, "meta.tag[]");
}

TEST(FieldAt, PaddingHasNoField) {
  DataType t = node();
  EXPECT_EQ(field_at(t, 4), nullptr);
  EXPECT_EQ(field_at(t, 7), nullptr);
  EXPECT_EQ(field_at(t, 19), nullptr);
  EXPECT_EQ(field_at(t, 23), nullptr);
}

TEST(FieldAt, ArraysOfTheTypeRepeatItsFields) {
  DataType t = node();
  EXPECT_EQ(field_at(t, 24 * 5 + 8)->name, "value");
  EXPECT_EQ(field_at(t, 24 * 1000 + 2)->name, "key");
}

TEST(FieldAt, UnknownLayoutHasNoFields) {
  DataType scalar{"double", 8, {}};
  EXPECT_EQ(field_at(scalar, 0), nullptr);
  DataType empty{"struct opaque", 0, {}};
  EXPECT_EQ(field_at(empty, 0), nullptr);
}

}  // namespace
}  // namespace whymiss::analysis
