// Tests for cache geometry: spec parsing, validation, formatting, sysfs and cpuid detection.
#include "model/geometry.h"
#include "model/geometry_detect.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace whymiss {

namespace {

namespace fs = std::filesystem;

// A substring expectation without gmock (the test links only gtest).
struct HasSubstr {
  explicit HasSubstr(std::string p) : part(std::move(p)) {}
  std::string part;
};
::testing::AssertionResult Contains(const char* text_expr, const char*, const std::string& text,
                                    const HasSubstr& sub) {
  if (text.find(sub.part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << text_expr << " is \"" << text << "\", which lacks \"" << sub.part << "\"";
}
#define EXPECT_HAS(text, sub) EXPECT_PRED_FORMAT2(Contains, text, sub)

constexpr uint64_t K = 1024;
constexpr uint64_t M = 1024 * 1024;
constexpr uint64_t G = 1024 * M;

void ExpectLevel(const LevelGeometry& lv, const char* name, uint64_t size, uint32_t ways,
                 uint32_t line) {
  EXPECT_EQ(lv.name, name);
  EXPECT_EQ(lv.size, size) << name;
  EXPECT_EQ(lv.ways, ways) << name;
  EXPECT_EQ(lv.line, line) << name;
}

void ExpectSameLevels(const CacheGeometry& a, const CacheGeometry& b) {
  ASSERT_EQ(a.levels.size(), b.levels.size());
  for (size_t i = 0; i < a.levels.size(); ++i) {
    const LevelGeometry& lv = b.levels[i];
    ExpectLevel(a.levels[i], lv.name.c_str(), lv.size, lv.ways, lv.line);
  }
}

// Parses `spec`, expecting failure; returns the error sentence.
std::string ParseError(const std::string& spec) {
  Result<CacheGeometry> r = parse_cache_spec(spec);
  EXPECT_FALSE(r.ok()) << "spec accepted: " << spec;
  return r.ok() ? std::string() : r.error();
}

TEST(GeometryParse, ParsesThreeLevels) {
  Result<CacheGeometry> r = parse_cache_spec("L1=48K:12:64,L2=1M:16:64,L3=32M:16:64");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->levels.size(), 3u);
  ExpectLevel(r->levels[0], "L1", 48 * K, 12, 64);
  ExpectLevel(r->levels[1], "L2", 1 * M, 16, 64);
  ExpectLevel(r->levels[2], "L3", 32 * M, 16, 64);
  EXPECT_EQ(r->source, "--cache");
  EXPECT_EQ(r->line(), 64u);
}

TEST(GeometryParse, SuffixesAreBinaryAndCaseInsensitive) {
  Result<CacheGeometry> r = parse_cache_spec("l1=32k:8:64,L2=2m:8:64,L3=1g:16:64");
  ASSERT_TRUE(r.ok()) << r.error();
  ExpectLevel(r->levels[0], "L1", 32 * K, 8, 64);
  ExpectLevel(r->levels[1], "L2", 2 * M, 8, 64);
  ExpectLevel(r->levels[2], "L3", 1 * G, 16, 64);
}

TEST(GeometryParse, PlainBytesSingleLevelAndSpaces) {
  Result<CacheGeometry> r = parse_cache_spec("  L1 = 1536 : 3 : 128 \n");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->levels.size(), 1u);
  ExpectLevel(r->levels[0], "L1", 1536, 3, 128);
  EXPECT_EQ(r->levels[0].sets(), 4u);
}

TEST(GeometryParse, FourLevelsAndLaterLevelSmallerAreAllowed) {
  Result<CacheGeometry> r = parse_cache_spec("L1=1M:16:64,L2=32K:8:64,L3=8M:16:64,L4=128M:16:64");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->levels.size(), 4u);
  ExpectLevel(r->levels[1], "L2", 32 * K, 8, 64);
  ExpectLevel(r->levels[3], "L4", 128 * M, 16, 64);
}

TEST(GeometryParse, FullyAssociativeAndDirectMapped) {
  Result<CacheGeometry> r = parse_cache_spec("L1=4K:64:64,L2=64K:1:64");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->levels[0].sets(), 1u);
  EXPECT_EQ(r->levels[1].sets(), 1024u);
}

TEST(GeometryParse, RejectsEmpty) {
  EXPECT_HAS(ParseError(""), HasSubstr("empty"));
  EXPECT_HAS(ParseError("  \t"), HasSubstr("empty"));
  EXPECT_HAS(ParseError("L1=48K:12:64,"), HasSubstr("empty entry"));
  EXPECT_HAS(ParseError(",L1=48K:12:64"), HasSubstr("empty entry"));
}

TEST(GeometryParse, RejectsBadLevelNames) {
  EXPECT_HAS(ParseError("L5=48K:12:64"), HasSubstr("unknown cache level 'L5'"));
  EXPECT_HAS(ParseError("L0=48K:12:64"), HasSubstr("unknown cache level 'L0'"));
  EXPECT_HAS(ParseError("X1=48K:12:64"), HasSubstr("unknown cache level 'X1'"));
  EXPECT_HAS(ParseError("L12=48K:12:64"), HasSubstr("unknown cache level"));
  EXPECT_HAS(ParseError("=48K:12:64"), HasSubstr("unknown cache level"));
  EXPECT_HAS(ParseError("48K:12:64"), HasSubstr("L<n>=size:ways:line"));
}

TEST(GeometryParse, RejectsDuplicateOutOfOrderAndGaps) {
  EXPECT_HAS(ParseError("L1=48K:12:64,L1=48K:12:64"), HasSubstr("L1 is given more than once"));
  EXPECT_HAS(ParseError("L1=48K:12:64,L2=1M:16:64,L2=1M:16:64"),
             HasSubstr("L2 is given more than once"));
  EXPECT_HAS(ParseError("L2=1M:16:64,L1=48K:12:64"), HasSubstr("expected L1 but found L2"));
  EXPECT_HAS(ParseError("L1=48K:12:64,L3=32M:16:64"), HasSubstr("expected L2 but found L3"));
}

TEST(GeometryParse, RejectsTooManyLevels) {
  EXPECT_HAS(ParseError("L1=32K:8:64,L2=1M:16:64,L3=8M:16:64,L4=64M:16:64,L4=64M:16:64"),
             HasSubstr("at most 4"));
}

TEST(GeometryParse, RejectsMissingOrExtraFields) {
  EXPECT_HAS(ParseError("L1=48K:12"), HasSubstr("L1 needs size:ways:line"));
  EXPECT_HAS(ParseError("L1=48K"), HasSubstr("L1 needs size:ways:line"));
  EXPECT_HAS(ParseError("L1="), HasSubstr("L1 needs size:ways:line"));
  EXPECT_HAS(ParseError("L1=48K:12:64:1"), HasSubstr("L1 needs size:ways:line"));
  EXPECT_HAS(ParseError("L1=:12:64"), HasSubstr("L1 size ''"));
}

TEST(GeometryParse, RejectsNonNumeric) {
  EXPECT_HAS(ParseError("L1=abc:12:64"), HasSubstr("L1 size 'abc' is not a whole number"));
  EXPECT_HAS(ParseError("L1=48X:12:64"), HasSubstr("L1 size '48X'"));
  EXPECT_HAS(ParseError("L1=48KB:12:64"), HasSubstr("L1 size '48KB'"));
  EXPECT_HAS(ParseError("L1=-48K:12:64"), HasSubstr("L1 size"));
  EXPECT_HAS(ParseError("L1=1.5M:12:64"), HasSubstr("L1 size"));
  EXPECT_HAS(ParseError("L1=48K:twelve:64"), HasSubstr("L1 ways 'twelve'"));
  EXPECT_HAS(ParseError("L1=48K:12:0x40"), HasSubstr("L1 line size '0x40'"));
}

TEST(GeometryParse, RejectsOverflow) {
  EXPECT_HAS(ParseError("L1=99999999999999G:12:64"), HasSubstr("too large"));
  EXPECT_HAS(ParseError("L1=18446744073709551616:1:64"), HasSubstr("too large"));
  EXPECT_HAS(ParseError("L1=48K:4294967296:64"), HasSubstr("L1 ways '4294967296' is too large"));
  EXPECT_HAS(ParseError("L1=48K:12:99999999999"), HasSubstr("line size"));
}

// #19 item 14: a size that fits in 64 bits but no cache (2^62) was accepted, and printed as
// L1=4294967296G.
TEST(GeometryParse, RejectsAbsurdSizes) {
  EXPECT_HAS(ParseError("L1=4294967296G:16:64"), HasSubstr("L1 size 4294967296G is larger than the 1024G a level may have"));
  EXPECT_HAS(ParseError("L1=48K:12:64,L2=2048G:16:64"), HasSubstr("L2 size 2048G is larger"));
  EXPECT_TRUE(parse_cache_spec("L1=1024G:16:64").ok());
}

TEST(GeometryParse, RejectsZeroSizeAndZeroWays) {
  EXPECT_HAS(ParseError("L1=0:12:64"), HasSubstr("L1 has size 0"));
  EXPECT_HAS(ParseError("L1=0K:12:64"), HasSubstr("L1 has size 0"));
  EXPECT_HAS(ParseError("L1=48K:0:64"), HasSubstr("L1 has 0 ways"));
}

TEST(GeometryParse, RejectsBadLineSizes) {
  EXPECT_HAS(ParseError("L1=48K:12:4"), HasSubstr("power of two of at least 8"));
  EXPECT_HAS(ParseError("L1=48K:12:0"), HasSubstr("power of two of at least 8"));
  EXPECT_HAS(ParseError("L1=48K:12:48"), HasSubstr("power of two of at least 8"));
  EXPECT_HAS(ParseError("L1=48K:12:64,L2=1M:16:128"),
             HasSubstr("L2 has 128-byte lines but L1 has 64-byte lines"));
}

TEST(GeometryParse, RejectsIndivisibleSizeAcceptsAnySetCount) {
  EXPECT_HAS(ParseError("L1=1000:12:64"), HasSubstr("not a multiple of 12 ways"));
  // The Xeon whose sysfs gave L3 300M 20-way: 245,760 sets.
  auto g = parse_cache_spec("L1=48K:12:64,L2=2M:16:64,L3=300M:20:64");
  ASSERT_TRUE(g.ok()) << g.error();
  EXPECT_EQ(g->levels[2].sets(), 245760u);
  EXPECT_HAS(ParseError("L1=512G:1:8"), HasSubstr("more than the 4294967296"));
}

TEST(GeometryParse, ErrorsAreOneLine) {
  for (const char* spec : {"", "L1=4\n8K:12:64", "L1=\x01\x02:12:64", "L9=1:1:1"}) {
    std::string e = ParseError(spec);
    EXPECT_FALSE(e.empty());
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(e.back(), '.') << e;
  }
  // Long garbage is shortened in the message.
  EXPECT_LT(ParseError("L1=" + std::string(10000, 'x') + ":1:64").size(), 200u);
}

TEST(GeometryValidate, NamesTheLevel) {
  CacheGeometry g = default_geometry();
  ASSERT_TRUE(validate(g).ok());
  g.levels[1].ways = 0;
  Status st = validate(g);
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.error(), HasSubstr("L2 has 0 ways"));

  g = default_geometry();
  g.levels[2].size = 48 * M + 64;
  st = validate(g);
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.error(), HasSubstr("L3 size"));
  g.levels[2].size = 48 * M;  // 49152 sets: modelled by modulo indexing (indexing_note)
  EXPECT_TRUE(validate(g).ok());

  g = default_geometry();
  g.levels[0].name.clear();
  g.levels[0].line = 12;
  st = validate(g);
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.error(), HasSubstr("level 1 has 12-byte lines"));
}

TEST(GeometryValidate, RejectsNoLevelsAndTooMany) {
  CacheGeometry g;
  EXPECT_HAS(validate(g).error(), HasSubstr("no levels"));
  g = default_geometry();
  while (g.levels.size() <= kMaxLevels) g.levels.push_back(g.levels.back());
  EXPECT_HAS(validate(g).error(), HasSubstr("at most 4"));
}

TEST(Geometry, SetsComputation) {
  CacheGeometry g = default_geometry();
  EXPECT_EQ(g.levels[0].sets(), 64u);
  EXPECT_EQ(g.levels[1].sets(), 1024u);
  EXPECT_EQ(g.levels[2].sets(), 32768u);
  EXPECT_EQ((LevelGeometry{"L1", 4096, 0, 64}.sets()), 0u);
  EXPECT_EQ((LevelGeometry{"L1", 4096, 4, 0}.sets()), 0u);
}

TEST(Geometry, DefaultIsZen5) {
  CacheGeometry g = default_geometry();
  EXPECT_EQ(g.source, "default");
  ASSERT_EQ(g.levels.size(), 3u);
  ExpectLevel(g.levels[0], "L1", 48 * K, 12, 64);
  ExpectLevel(g.levels[1], "L2", 1 * M, 16, 64);
  ExpectLevel(g.levels[2], "L3", 32 * M, 16, 64);
  EXPECT_EQ(g.to_spec(), "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64");
}

TEST(Geometry, FormatSize) {
  EXPECT_EQ(format_size(0), "0");
  EXPECT_EQ(format_size(1), "1");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_size(1536), "1536");
  EXPECT_EQ(format_size(1024), "1K");
  EXPECT_EQ(format_size(48 * K), "48K");
  EXPECT_EQ(format_size(1536 * K), "1536K");
  EXPECT_EQ(format_size(1 * M), "1M");
  EXPECT_EQ(format_size(32 * M), "32M");
  EXPECT_EQ(format_size(1 * G), "1G");
  EXPECT_EQ(format_size(G + K), "1048577K");
}

TEST(Geometry, ToSpecRoundTrips) {
  const char* specs[] = {
      "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64",
      "L1=1536:3:128",
      "L1=1M:16:64,L2=32K:8:64,L3=8M:16:64,L4=1G:16:64",
      "L1=3K:3:8,L2=6K:3:8",
  };
  for (const char* spec : specs) {
    Result<CacheGeometry> a = parse_cache_spec(spec);
    ASSERT_TRUE(a.ok()) << a.error();
    EXPECT_EQ(a->to_spec(), spec);
    Result<CacheGeometry> b = parse_cache_spec(a->to_spec());
    ASSERT_TRUE(b.ok()) << b.error();
    ExpectSameLevels(*b, *a);
  }
  Result<CacheGeometry> d = parse_cache_spec(default_geometry().to_spec());
  ASSERT_TRUE(d.ok()) << d.error();
  ExpectSameLevels(*d, default_geometry());
  // Non-canonical input comes back canonical.
  Result<CacheGeometry> c = parse_cache_spec("l1=49152:12:64,L2=1024k:16:64");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->to_spec(), "L1=48K:12:64,L2=1M:16:64");
}

// A fake sysfs cache directory in a fresh temporary directory, removed afterwards.
class GeometrySysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("whymiss_geometry_test_" + std::to_string(::getpid()) +
                                        "_" + std::to_string(counter++) + "_" + info->name());
    fs::remove_all(dir_);
    ASSERT_TRUE(fs::create_directories(dir_));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Write(const std::string& rel, const std::string& content) {
    fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream f(p, std::ios::binary);
    f << content;
  }

  void AddIndex(int index, const std::string& level, const std::string& type,
                const std::string& size, const std::string& ways, const std::string& line) {
    const std::string d = "index" + std::to_string(index) + "/";
    Write(d + "level", level + "\n");
    Write(d + "type", type + "\n");
    Write(d + "size", size + "\n");
    Write(d + "ways_of_associativity", ways + "\n");
    Write(d + "coherency_line_size", line + "\n");
    Write(d + "shared_cpu_list", "0-1\n");
  }

  // The usual x86 layout: L1D, L1I, L2, L3.
  void AddZen5() {
    AddIndex(0, "1", "Data", "48K", "12", "64");
    AddIndex(1, "1", "Instruction", "32K", "8", "64");
    AddIndex(2, "2", "Unified", "1024K", "16", "64");
    AddIndex(3, "3", "Unified", "32768K", "16", "64");
  }

  std::string DetectError() {
    Result<CacheGeometry> r = detect_from_sysfs(dir_.string());
    EXPECT_FALSE(r.ok());
    if (r.ok()) return {};
    EXPECT_EQ(r.error().find('\n'), std::string::npos) << r.error();
    return r.error();
  }

  fs::path dir_;
};

TEST_F(GeometrySysfs, DetectsDataAndUnifiedCaches) {
  AddZen5();
  Write("uevent", "");  // unrelated entries are ignored
  Result<CacheGeometry> r = detect_from_sysfs(dir_.string());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->source, "sysfs");
  ASSERT_EQ(r->levels.size(), 3u);
  ExpectLevel(r->levels[0], "L1", 48 * K, 12, 64);
  ExpectLevel(r->levels[1], "L2", 1 * M, 16, 64);
  ExpectLevel(r->levels[2], "L3", 32 * M, 16, 64);
  EXPECT_EQ(r->to_spec(), "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64");
}

TEST_F(GeometrySysfs, SortsByLevelNotIndex) {
  AddIndex(0, "3", "Unified", "8M", "16", "64");
  AddIndex(1, "1", "Instruction", "64K", "4", "64");
  AddIndex(2, "2", "Unified", "512K", "8", "64");
  AddIndex(10, "1", "Data", "32K", "8", "64");
  Result<CacheGeometry> r = detect_from_sysfs(dir_.string());
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->levels.size(), 3u);
  ExpectLevel(r->levels[0], "L1", 32 * K, 8, 64);
  ExpectLevel(r->levels[1], "L2", 512 * K, 8, 64);
  ExpectLevel(r->levels[2], "L3", 8 * M, 16, 64);
}

TEST_F(GeometrySysfs, MissingDirectory) {
  const std::string missing = (dir_ / "does_not_exist").string();
  Result<CacheGeometry> r = detect_from_sysfs(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error(), HasSubstr(missing));
}

TEST_F(GeometrySysfs, EmptyOrInstructionOnly) {
  EXPECT_HAS(DetectError(), HasSubstr("no data or unified caches"));
  AddIndex(0, "1", "Instruction", "32K", "8", "64");
  EXPECT_HAS(DetectError(), HasSubstr("no data or unified caches"));
}

TEST_F(GeometrySysfs, GarbageSize) {
  AddZen5();
  Write("index2/size", "banana");
  EXPECT_HAS(DetectError(), HasSubstr("index2/size contains 'banana'"));
  Write("index2/size", "99999999999999999999K");
  EXPECT_HAS(DetectError(), HasSubstr("index2/size"));
  Write("index2/size", std::string(100000, '7'));
  EXPECT_HAS(DetectError(), HasSubstr("index2/size"));
}

TEST_F(GeometrySysfs, GarbageBinaryLevelAndType) {
  AddZen5();
  Write("index3/level", std::string("\x00\xff\x7f", 3));
  EXPECT_HAS(DetectError(), HasSubstr("index3/level"));
  Write("index3/level", "3");
  Write("index3/type", "Bogus");
  EXPECT_HAS(DetectError(), HasSubstr("expected Data, Instruction or Unified"));
  Write("index3/type", "");
  EXPECT_HAS(DetectError(), HasSubstr("index3/type"));
}

TEST_F(GeometrySysfs, MissingAttribute) {
  AddZen5();
  fs::remove(dir_ / "index0/ways_of_associativity");
  EXPECT_HAS(DetectError(), HasSubstr("index0/ways_of_associativity is missing"));
  fs::remove_all(dir_ / "index0");
  fs::create_directories(dir_ / "index0/type");  // a directory where a file should be
  EXPECT_HAS(DetectError(), HasSubstr("index0/type"));
}

TEST_F(GeometrySysfs, DuplicateLevelAndGap) {
  AddZen5();
  AddIndex(4, "2", "Data", "1024K", "16", "64");
  EXPECT_HAS(DetectError(), HasSubstr("more than one data cache at level 2"));
  fs::remove_all(dir_ / "index4");
  fs::remove_all(dir_ / "index2");
  EXPECT_HAS(DetectError(), HasSubstr("level-3 cache but no level-2"));
  AddIndex(2, "0", "Unified", "1024K", "16", "64");
  EXPECT_HAS(DetectError(), HasSubstr("level 0"));
}

TEST_F(GeometrySysfs, UnmodelableGeometryIsAnError) {
  AddZen5();
  Write("index3/size", "98304K");  // 96M / 16 / 64 = 98304 sets: modelled (modulo indexing)
  auto g = detect_from_sysfs(dir_.string());
  ASSERT_TRUE(g.ok()) << g.error();
  EXPECT_EQ(g->levels[2].sets(), 98304u);
  Write("index3/size", "32768K");
  Write("index3/coherency_line_size", "128");
  EXPECT_HAS(DetectError(), HasSubstr("one line size"));
}

// Encodes one leaf-4 / 0x8000001D descriptor.
std::array<uint32_t, 4> Leaf(uint32_t type, uint32_t level, uint32_t ways, uint32_t line,
                             uint32_t sets, uint32_t partitions = 1, bool fully = false) {
  uint32_t eax = type | (level << 5) | (1u << 8) | (fully ? 1u << 9 : 0u);
  uint32_t ebx = ((ways - 1) << 22) | ((partitions - 1) << 12) | (line - 1);
  return {eax, ebx, sets - 1, 0};
}

TEST(GeometryCpuidDecode, Zen5Layout) {
  std::vector<std::array<uint32_t, 4>> leaves = {
      Leaf(1, 1, 12, 64, 64),    Leaf(2, 1, 8, 64, 64), Leaf(3, 2, 16, 64, 1024),
      Leaf(3, 3, 16, 64, 32768), Leaf(0, 0, 1, 1, 1),   Leaf(1, 4, 2, 64, 4),  // after the end
  };
  Result<CacheGeometry> r = detail::decode_cache_leaf(leaves, "leaf 0x8000001D");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->source, "cpuid");
  EXPECT_EQ(r->to_spec(), "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64");
}

TEST(GeometryCpuidDecode, PartitionsAndFullyAssociative) {
  Result<CacheGeometry> r = detail::decode_cache_leaf(
      {Leaf(1, 1, 8, 64, 32, 2), Leaf(3, 2, 4, 64, 1, 1, true), Leaf(0, 0, 1, 1, 1)}, "leaf 4");
  ASSERT_TRUE(r.ok()) << r.error();
  ExpectLevel(r->levels[0], "L1", 32 * K, 8, 64);
  EXPECT_EQ(r->levels[0].sets(), 64u);
  ExpectLevel(r->levels[1], "L2", 256, 4, 64);
  EXPECT_EQ(r->levels[1].sets(), 1u);
}

TEST(GeometryCpuidDecode, Errors) {
  Result<CacheGeometry> r = detail::decode_cache_leaf({Leaf(0, 0, 1, 1, 1)}, "leaf 4");
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error(), HasSubstr("cpuid leaf 4 lists no data or unified caches"));
  r = detail::decode_cache_leaf({}, "leaf 4");
  ASSERT_FALSE(r.ok());
  r = detail::decode_cache_leaf({Leaf(1, 1, 12, 64, 64), Leaf(3, 2, 16, 64, 1000)}, "leaf 4");
  ASSERT_TRUE(r.ok()) << r.error();  // 1000 sets: modelled by modulo indexing
  EXPECT_EQ(r->levels[1].sets(), 1000u);
  r = detail::decode_cache_leaf({Leaf(2, 1, 8, 64, 64), Leaf(3, 2, 16, 64, 1024)}, "leaf 4");
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.error(), HasSubstr("no level-1"));
}

// Runs on any machine: either a geometry the simulator can model, or a clear sentence.
TEST(GeometryCpuid, DetectsValidGeometryOrExplains) {
  Result<CacheGeometry> r = detect_from_cpuid();
  if (r.ok()) {
    EXPECT_EQ(r->source, "cpuid");
    EXPECT_TRUE(validate(*r).ok()) << validate(*r).error();
    for (size_t i = 0; i < r->levels.size(); ++i) {
      EXPECT_EQ(r->levels[i].name, "L" + std::to_string(i + 1));
    }
    Result<CacheGeometry> again = parse_cache_spec(r->to_spec());
    ASSERT_TRUE(again.ok()) << again.error();
    ExpectSameLevels(*again, *r);
    std::cout << "cpuid: " << r->to_spec() << "\n";
  } else {
    EXPECT_HAS(r.error(), HasSubstr("cpuid"));
    EXPECT_EQ(r.error().find('\n'), std::string::npos);
    std::cout << "cpuid: " << r.error() << "\n";
  }
}

TEST(GeometryDetect, NeverFailsAndValidates) {
  CacheGeometry g = detect_geometry();
  EXPECT_TRUE(validate(g).ok()) << validate(g).error();
  EXPECT_TRUE(g.source == "sysfs" || g.source == "cpuid" || g.source == "default") << g.source;
  std::cout << "detected (" << g.source << "): " << g.to_spec() << "\n";
}

}  // namespace
}  // namespace whymiss
