// The data-type analysis (analysis/data_types.h) on hand-built profiles and a fake TypeOracle:
// misses are placed on types and fields through the instructions' sampled addresses, split
// evenly between them; unknown data stays "unknown"; false-sharing field pairs come from the
// line's granule masks; findings are named with the type and field of their data.
#include <gtest/gtest.h>

#include "analysis/data_types.h"

namespace whymiss::analysis {
namespace {

using namespace profile;
constexpr int kCap = 2, kConf = 3, kFS = 5;

// struct pair { long a; long b; char pad[16]; }  (32 bytes, a hole-free layout)
DataType pair_type() { return {"struct pair", 32, {{"a", 0, 8}, {"b", 8, 8}, {"pad[]", 16, 16}}}; }

class FakeTypes : public TypeOracle {
 public:
  DataType pair = pair_type();
  DataType counter{"long int", 8, {}};
  uint64_t global_start = 0x5000;
  const DataType* heap_type(const Profile& p, const ObjectRecord& o) override {
    // Objects allocated at site 0 are pairs; any other site is unknown.
    return o.site == 0 && !p.sites.empty() ? &pair : nullptr;
  }
  const DataType* global_type(uint64_t addr, uint64_t* start) override {
    if (addr < global_start || addr >= global_start + 8) return nullptr;
    *start = global_start;
    return &counter;
  }
};

Profile base() {
  Profile p;
  p.meta.mode = uint32_t(Mode::Exact);
  p.geometry.levels = {{"L1", 32 * 1024, 8, 64}, {"L2", 1 << 20, 16, 64}};
  p.counters.resize(2);
  p.sites.resize(1);
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

const TypeMisses* find(const DataTypes& d, const std::string& name) {
  for (const auto& t : d.types)
    if (t.name == name) return &t;
  return nullptr;
}

const FieldMisses* field(const TypeMisses& t, const std::string& name) {
  for (const auto& f : t.fields)
    if (f.name == name) return &f;
  return nullptr;
}

TEST(DataTypes, PlacesMissesOnTypesAndFieldsBySampledAddresses) {
  Profile p = base();
  p.counters[0].by_kind[kCap][0] = 1000;
  p.counters[0].by_kind[kConf][0] = 200;
  p.objects = {object(1, 0x10000, 32 * 100, 0), object(2, 0x20000, 4096, 1)};
  // 800 capacity misses at two addresses: field b of element 3, field a of element 7.
  InstructionRecord i1{};
  i1.ip = 0x400100;
  i1.misses[0][kCap] = 800;
  i1.sample_addrs[0] = 0x10000 + 3 * 32 + 8;
  i1.sample_addrs[1] = 0x10000 + 7 * 32 + 2;
  // 200 conflict misses, one address in the untyped object, one in the global.
  InstructionRecord i2{};
  i2.ip = 0x400200;
  i2.misses[0][kConf] = 200;
  i2.misses[1][kConf] = 50;
  i2.sample_addrs[0] = 0x20010;
  i2.sample_addrs[1] = 0x5004;
  // 200 capacity misses with no address: not placed.
  InstructionRecord i3{};
  i3.ip = 0x400300;
  i3.misses[0][kCap] = 200;
  p.instructions = {i1, i2, i3};
  FakeTypes types;
  const DataTypes d = data_types(p, types);

  ASSERT_EQ(d.types.size(), 3u);
  EXPECT_EQ(d.types[0].name, "struct pair");  // 800 misses: first
  EXPECT_DOUBLE_EQ(d.types[0].misses[0][kCap], 800);
  EXPECT_EQ(d.types[0].heap_objects, 1u);
  EXPECT_DOUBLE_EQ(field(d.types[0], "a")->misses[0][kCap], 400);  // split evenly
  EXPECT_DOUBLE_EQ(field(d.types[0], "b")->misses[0][kCap], 400);
  EXPECT_EQ(field(d.types[0], "pad[]"), nullptr);  // cold: nothing placed on it
  const TypeMisses* unknown = find(d, "unknown");
  ASSERT_NE(unknown, nullptr);
  EXPECT_FALSE(unknown->known);
  EXPECT_DOUBLE_EQ(unknown->misses[0][kConf], 100);
  EXPECT_DOUBLE_EQ(unknown->misses[1][kConf], 25);
  EXPECT_TRUE(unknown->fields.empty());
  EXPECT_EQ(unknown->heap_objects, 1u);  // object 2: no type
  const TypeMisses* counter = find(d, "long int");
  ASSERT_NE(counter, nullptr);
  EXPECT_EQ(counter->globals, 1u);
  ASSERT_EQ(counter->fields.size(), 1u);  // a scalar is one row named after the type
  EXPECT_EQ(counter->fields[0].name, "long int");
  EXPECT_DOUBLE_EQ(d.program[0], 1200);
  EXPECT_DOUBLE_EQ(d.unplaced[0], 200);
}

TEST(DataTypes, ReusedMemoryGoesToTheObjectTheInstructionTouched) {
  Profile p = base();
  // Object 1 (a pair) freed, object 2 (unknown) allocated at the same address.
  p.objects = {object(1, 0x10000, 64, 0), object(2, 0x10000, 64, 1)};
  InstructionRecord i{};
  i.misses[0][kCap] = 10;
  i.sample_addrs[0] = 0x10008;
  i.objects[0] = 1;
  i.object_count = 1;
  p.instructions = {i};
  FakeTypes types;
  const DataTypes d = data_types(p, types);
  ASSERT_EQ(d.types.size(), 1u);
  EXPECT_EQ(d.types[0].name, "struct pair");
  // Without the hint the latest allocation covering the address wins: unknown.
  p.instructions[0].objects[0] = 0;
  EXPECT_EQ(data_types(p, types).types[0].name, "unknown");
}

TEST(DataTypes, FalseSharingPairFromGranuleMasks) {
  Profile p = base();
  p.objects = {object(1, 0x10000, 64, 0)};  // two pairs in one line
  LineRecord l{};
  l.line = 0x10000 / 64;
  l.misses[kFS] = 500;
  for (auto& t : l.threads) t = kNoThread;
  l.threads[0] = 0;
  l.threads[1] = 1;
  l.thread_count = 2;
  // Byte granules (64-byte lines).
  l.write_mask[0] = 0xFFull << 0;   // thread 0 writes element 0's a (bytes 0-7)
  l.read_mask[0] = 0xFFull << 0;
  l.write_mask[1] = 0xFFull << 32;  // thread 1 writes element 1's a (bytes 32-39)
  l.read_mask[1] = 0xFFull << 40;   // and reads element 1's b
  l.objects[0] = 1;
  l.object_count = 1;
  p.lines = {l};
  InstructionRecord i{};
  i.misses[0][kFS] = 500;
  i.sample_addrs[0] = 0x10000;
  i.sample_addrs[1] = 0x10020;
  p.instructions = {i};
  FakeTypes types;
  const DataTypes d = data_types(p, types);
  ASSERT_EQ(d.types.size(), 1u);
  const auto& pairs = d.types[0].false_pairs;
  // a(0) written by thread 0 against a(32) and b(40) of thread 1; a(32) written by thread 1
  // against a(0): two distinct pairs by name, the misses split between them.
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_DOUBLE_EQ(pairs[0].misses + pairs[1].misses, 500);
  bool aa = false, ab = false;
  for (const auto& fp : pairs) {
    aa |= fp.a == "a" && fp.b == "a";
    ab |= fp.a == "a" && fp.b == "b";
  }
  EXPECT_TRUE(aa);
  EXPECT_TRUE(ab);
  EXPECT_DOUBLE_EQ(field(d.types[0], "a")->misses[0][kFS], 500);
}

TEST(DataTypes, FindingsNamedWithTypeAndField) {
  Profile p = base();
  p.objects = {object(1, 0x10000, 3200, 0), object(2, 0x20000, 64, 1)};
  InstructionRecord i{};
  i.ip = 0x400100;
  i.sample_addrs[0] = 0x10000 + 32 * 5 + 9;  // b
  p.instructions = {i};
  Analysis a;
  Finding typed;
  typed.instructions = {{0x400100, 10}};
  Finding sharing;
  sharing.line_addr = 0x10000;
  sharing.line_threads = {{0, 0, 0xFFull << 16}};  // wrote bytes 16-23: pad[]
  Finding untyped;
  ObjectRef o;
  o.heap = true;
  o.serial = 2;
  o.sample_addr = 0x20000;
  untyped.objects = {o};
  a.findings = {typed, sharing, untyped};
  FakeTypes types;
  name_finding_types(a, p, types);
  EXPECT_EQ(a.findings[0].data_type, "struct pair");
  EXPECT_EQ(a.findings[0].data_field, "b");
  EXPECT_EQ(a.findings[0].data_how, "sampled: 1 of 1 sampled miss address");
  EXPECT_EQ(a.findings[1].data_field, "pad[]");
  EXPECT_EQ(a.findings[1].data_how, "counted: the bytes the threads wrote on the line");  // exact mode
  EXPECT_EQ(a.findings[2].data_type, "");  // unknown stays unknown
  EXPECT_EQ(a.findings[2].data_how, "");
  p.meta.mode = uint32_t(Mode::Soft);  // the line's bytes from samples
  a.findings = {sharing};
  name_finding_types(a, p, types);
  EXPECT_EQ(a.findings[0].data_how, "sampled: the bytes the threads wrote on the line");
}

TEST(DataTypes, FindingNamedWithTheFieldMostSampledAddressesFallIn) {
  Profile p = base();
  p.objects = {object(1, 0x10000, 3200, 0)};
  InstructionRecord i{}, j{};
  i.ip = 0x400100;
  i.sample_addrs[0] = 0x10000 + 32 * 2;      // a
  i.sample_addrs[1] = 0x10000 + 32 * 5 + 9;  // b
  i.sample_addrs[2] = 0x90000;               // no known data
  j.ip = 0x400200;
  j.sample_addrs[0] = 0x10000 + 32 * 6 + 8;  // b
  j.sample_addrs[1] = 0x10000 + 32 * 5 + 9;  // b again: the same address counts once
  p.instructions = {i, j};
  Analysis a;
  Finding f;
  f.instructions = {{0x400100, 10}, {0x400200, 5}};
  a.findings = {f};
  FakeTypes types;
  name_finding_types(a, p, types);
  EXPECT_EQ(a.findings[0].data_field, "b");  // 2 addresses, against a's 1
  EXPECT_EQ(a.findings[0].data_how, "sampled: 2 of 4 sampled miss addresses");
}

TEST(DataTypes, LatentCasesNamedWithEachThreadsFields) {
  Profile p = base();
  p.objects = {object(1, 0x10000, 3200, 0), object(2, 0x20000, 3200, 1)};
  LatentFalseSharing typed;
  typed.serial = 1;
  typed.threads = {1, 2, 3};
  typed.spans = {{{32 * 3, 32 * 3 + 8}},                       // element 3's a
                 {{32 * 7 + 12, 32 * 7 + 20}},                 // element 7: b's end, pad[]'s start
                 {{32 * 2 + 20, 32 * 3 + 4}, {32 * 9 + 8, 32 * 9 + 9}}};  // pad[], a; then b
  LatentFalseSharing untyped = typed;
  untyped.serial = 2;  // site 1: unknown
  Predictions pr;
  pr.latent = {typed, untyped};
  FakeTypes types;
  name_latent_fields(pr, p, types);
  EXPECT_EQ(pr.latent[0].type, "struct pair");
  // Per thread, by offset in the type (an array of pairs: offsets modulo 32).
  const std::vector<std::vector<std::string>> want = {{"a"}, {"b", "pad[]"}, {"a", "b", "pad[]"}};
  EXPECT_EQ(pr.latent[0].fields, want);
  EXPECT_EQ(pr.latent[1].type, "");  // unknown stays unknown
  EXPECT_TRUE(pr.latent[1].fields.empty());
}

TEST(DataTypes, LatentFieldsNamePaddingAndScalarsHaveNone) {
  Profile p = base();
  p.objects = {object(1, 0x10000, 64, 0)};
  Predictions pr;
  LatentFalseSharing l;
  l.serial = 1;
  l.threads = {0, 1, 2};
  l.spans = {{{4, 8}}, {{2, 10}}, {}};  // the hole after x; x, the hole and y; nothing tracked
  pr.latent = {l};
  FakeTypes types;
  types.pair = {"struct s", 16, {{"x", 0, 4}, {"y", 8, 8}}};
  name_latent_fields(pr, p, types);
  const std::vector<std::vector<std::string>> want = {{"(padding)"}, {"x", "(padding)", "y"}, {}};
  EXPECT_EQ(pr.latent[0].fields, want);
  types.pair = {"long int", 8, {}};  // a scalar: its name, no members
  name_latent_fields(pr, p, types);
  EXPECT_EQ(pr.latent[0].type, "long int");
  EXPECT_TRUE(pr.latent[0].fields.empty());
}

TEST(FieldAt, OffsetsWithinArraysAndPadding) {
  DataType t{"struct s", 16, {{"x", 0, 4}, {"y", 8, 8}}};
  EXPECT_EQ(field_at(t, 0)->name, "x");
  EXPECT_EQ(field_at(t, 4), nullptr);  // padding
  EXPECT_EQ(field_at(t, 16 * 3 + 9)->name, "y");
}

}  // namespace
}  // namespace whymiss::analysis
