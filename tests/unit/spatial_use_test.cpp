// Spatial use by type and field (analysis/spatial_use.h) on hand-built profiles: per-phase counts
// of ObjectUseRecords map to fields through the type's layout (size dividing 64), the type's use
// is touched over fetched bytes, cold fields ride along only beside touched ones, and profiles
// without the records (sampling modes, WHYMISS_SPATIAL=0) say why.
#include <gtest/gtest.h>

#include "analysis/spatial_use.h"

namespace whymiss::analysis {
namespace {

using namespace profile;

// struct pair { long a; long b; char pad[16]; } (32 bytes: phases p and p + 32 are one byte).
class FakeTypes : public TypeOracle {
 public:
  DataType pair{"struct pair", 32, {{"a", 0, 8}, {"b", 8, 8}, {"pad[]", 16, 16}}};
  DataType odd{"struct odd", 24, {{"x", 0, 8}, {"y", 8, 16}}};
  const DataType* heap_type(const Profile&, const ObjectRecord& o) override {
    return o.site == 0 ? &pair : o.site == 1 ? &odd : nullptr;
  }
  const DataType* global_type(uint64_t, uint64_t*) override { return nullptr; }
};

Profile base() {
  Profile p;
  p.meta.mode = uint32_t(Mode::Exact);
  p.geometry.levels = {{"L1", 32 * 1024, 8, 64}};
  ObjectUseInfoRecord info{};
  info.line_bytes = 64;
  info.evicted_lines = 1000;
  info.outside_lines = 100;
  p.object_use_info.push_back(info);
  return p;
}

ObjectRecord object(uint64_t serial, uint64_t start, uint64_t size, uint32_t site) {
  ObjectRecord o{};
  o.serial = serial;
  o.start = start;
  o.size = size;
  o.site = site;
  return o;
}

// `lines` full evicted lines of object `serial`, with bytes [lo, hi) of every element of
// `elem` bytes touched in `touched_lines` of them.
ObjectUseRecord use(uint64_t serial, uint64_t lines, uint64_t elem, uint64_t lo, uint64_t hi,
                    uint64_t touched_lines) {
  ObjectUseRecord u{};
  u.serial = serial;
  u.lines = lines;
  u.fetched_bytes = 64 * lines;
  for (int ph = 0; ph < kUsePhases; ++ph) {
    u.fetched[ph] = lines;
    if (uint64_t(ph) % elem >= lo && uint64_t(ph) % elem < hi) {
      u.touched[ph] = touched_lines;
      u.touched_bytes += touched_lines;
    }
  }
  return u;
}

const FieldUse* field(const TypeUse& t, const std::string& name) {
  for (const auto& f : t.fields)
    if (f.name == name) return &f;
  return nullptr;
}

TEST(SpatialUse, OneFieldOfFourTouchedIsAQuarterAndTheOthersRideAlong) {
  Profile p = base();
  p.objects = {object(1, 0x10000, 32 * 100, 0), object(2, 0x20000, 32 * 100, 0)};
  // Field a (bytes 0..7 of each 32-byte pair) touched in every evicted line of both objects.
  p.object_use = {use(1, 40, 32, 0, 8, 40), use(2, 10, 32, 0, 8, 10)};
  FakeTypes t;
  const SpatialUse s = spatial_use(p, t);
  ASSERT_TRUE(s.available);
  EXPECT_EQ(s.evicted_lines, 1000u);
  ASSERT_EQ(s.types.size(), 1u);
  const TypeUse& u = s.types[0];
  EXPECT_EQ(u.name, "struct pair");
  EXPECT_EQ(u.objects, 2u);
  EXPECT_EQ(u.lines, 50u);
  EXPECT_EQ(u.fetched, 50u * 64);
  EXPECT_EQ(u.touched, 50u * 16);  // 2 elements a line, 8 bytes each
  EXPECT_DOUBLE_EQ(u.use, 0.25);
  ASSERT_TRUE(u.per_field);
  ASSERT_EQ(u.fields.size(), 3u);
  EXPECT_DOUBLE_EQ(field(u, "a")->use, 1.0);
  EXPECT_EQ(field(u, "a")->fetched, 50u * 16);
  EXPECT_FALSE(field(u, "a")->riding);
  EXPECT_TRUE(field(u, "b")->riding);
  EXPECT_TRUE(field(u, "pad[]")->riding);
  EXPECT_EQ(field(u, "pad[]")->fetched, 50u * 32);
}

TEST(SpatialUse, AFieldTouchedInAFewLinesIsNotRidingAboveTheThreshold) {
  Profile p = base();
  p.objects = {object(1, 0x10000, 32 * 1000, 0)};
  ObjectUseRecord u = use(1, 100, 32, 0, 8, 100);
  // b touched in 5 of 100 lines (5%, above kRidingShare), pad[] in 1 (1%, below).
  for (int ph = 0; ph < kUsePhases; ++ph) {
    const int b = ph % 32;
    const uint64_t add = b >= 8 && b < 16 ? 5 : b >= 16 ? 1 : 0;
    u.touched[ph] += add;
    u.touched_bytes += add;
  }
  p.object_use = {u};
  FakeTypes t;
  const SpatialUse s = spatial_use(p, t);
  ASSERT_EQ(s.types.size(), 1u);
  EXPECT_FALSE(field(s.types[0], "b")->riding);
  EXPECT_DOUBLE_EQ(field(s.types[0], "b")->use, 0.05);
  EXPECT_TRUE(field(s.types[0], "pad[]")->riding);
}

TEST(SpatialUse, NothingTouchedMeansNothingRidesAlongAndOddSizesStayPerType) {
  Profile p = base();
  p.objects = {object(1, 0x10000, 3200, 0), object(2, 0x30000, 2400, 1), object(3, 0x40000, 64, 7)};
  p.object_use = {use(1, 10, 32, 0, 0, 0), use(2, 20, 24, 0, 8, 20), use(3, 5, 64, 0, 64, 5),
                  use(99, 3, 64, 0, 64, 3)};  // serial 99: no ObjectRecord, type unknown
  FakeTypes t;
  const SpatialUse s = spatial_use(p, t);
  ASSERT_EQ(s.types.size(), 2u);
  EXPECT_EQ(s.types[0].name, "struct odd");  // most lines first
  EXPECT_FALSE(s.types[0].per_field);        // 24 does not divide 64
  EXPECT_TRUE(s.types[0].fields.empty());
  EXPECT_EQ(s.types[1].name, "struct pair");
  EXPECT_DOUBLE_EQ(s.types[1].use, 0.0);
  for (const auto& f : s.types[1].fields) EXPECT_FALSE(f.riding) << f.name;
  EXPECT_EQ(s.untyped_lines, 8u);
}

TEST(SpatialUse, UnavailableWithAReasonInSamplingModesAndWithoutRecords) {
  FakeTypes t;
  Profile p = base();
  p.meta.mode = uint32_t(Mode::Soft);
  SpatialUse s = spatial_use(p, t);
  EXPECT_FALSE(s.available);
  EXPECT_NE(s.reason.find("exact mode only"), std::string::npos);
  p = base();
  p.object_use_info.clear();
  s = spatial_use(p, t);
  EXPECT_FALSE(s.available);
  EXPECT_NE(s.reason.find("WHYMISS_SPATIAL=0"), std::string::npos);
}

}  // namespace
}  // namespace whymiss::analysis
