// The exact-mode report on synthetic profiles, named by a namer that knows inline chains: what
// each section shows of the counts it is given (issue #18 items 5 and 7).
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "report/report.h"

namespace whymiss::report {
namespace {

using namespace profile;
constexpr int kCompulsory = 1, kCap = 2, kConf = 3;

// Addresses below 0x1000 are one-line helpers inlined into sum() at c.c:120; the rest are
// sum()'s own code at line (ip & 0xff).
class InlineNamer : public Namer {
 public:
  CodeLoc code(uint64_t ip) override { return chain(ip).front(); }
  std::vector<CodeLoc> chain(uint64_t ip) override {
    if (ip < 0x1000) return {{"read64", "/src/mem.h", 5}, {"sum", "/src/c.c", 120}};
    return {{"sum", "/src/c.c", uint32_t(ip & 0xff)}};
  }
  std::optional<DataName> global(uint64_t) override { return std::nullopt; }
  CodeLoc site(const SiteRecord&) override { return {"make", "/src/c.c", 7}; }
};

Profile three_levels() {
  Profile p;
  p.meta.mode = uint32_t(Mode::Exact);
  p.meta.exited = 1;
  p.geometry.levels = {{"L1", 48 * 1024, 12, 64}, {"L2", 1 << 20, 16, 64}, {"L3", 32u << 20, 16, 64}};
  p.counters.resize(3);
  return p;
}

InstructionRecord instr(uint64_t ip, uint64_t accesses) {
  InstructionRecord r{};
  r.ip = ip;
  r.accesses[0] = accesses;
  return r;
}

std::string render(const Profile& p, Format f, analysis::TypeOracle& types) {
  analysis::Analysis a = analysis::analyze(p);
  InlineNamer n;
  Options o;
  o.format = f;
  std::ostringstream out;
  write_report(out, p, a, n, types, o);
  return out.str();
}

std::string render(const Profile& p, Format f) {
  analysis::NoTypes none;
  return render(p, f, none);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// Item 7: with three levels the text "Source lines" table shows each level's misses, L2 too.
TEST(Report, SourceLinesShowEveryLevel) {
  Profile p = three_levels();
  InstructionRecord r = instr(0x401042, 100000);
  r.misses[0][kCap] = 50000;
  r.misses[1][kCap] = 31337;
  r.misses[2][kCompulsory] = 777;
  p.instructions.push_back(r);
  p.counters[0].by_kind[0][0] = 50000;
  p.counters[0].by_kind[kCap][0] = 50000;
  const std::string text = render(p, Format::Text);
  const size_t table = text.find("Source lines by L1 misses");
  ASSERT_NE(table, std::string::npos) << text;
  std::istringstream rows(text.substr(table));
  std::string title, header, row;
  std::getline(rows, title);
  std::getline(rows, header);
  std::getline(rows, row);
  EXPECT_NE(header.find(" L1 "), std::string::npos) << header;
  EXPECT_NE(header.find(" L2 "), std::string::npos) << header;
  EXPECT_NE(header.find(" L3 "), std::string::npos) << header;
  EXPECT_NE(row.find("50,000"), std::string::npos) << row;
  EXPECT_NE(row.find("31,337"), std::string::npos) << row;
  EXPECT_NE(row.find("777"), std::string::npos) << row;
}

// Item 7: a finding lists each object once, with its own misses; objects the report would name
// alike (one buffer allocated again at the same address) are one entry with their misses summed.
TEST(Report, EachObjectOnceWithItsOwnMisses) {
  Profile p = three_levels();
  InstructionRecord r = instr(0x401042, 40000);
  r.misses[0][kConf] = 5000;
  r.l1_set_mask = 1;
  const uint64_t reused = 0x7f0000010010, other = 0x7f0000051010;  // same L1 set offset
  const uint64_t misses[4] = {1000, 1200, 1400, 1400};
  for (uint64_t s = 1; s <= 4; ++s) {
    ObjectRecord o{};
    o.serial = s;
    o.start = s < 4 ? reused : other;  // three allocations at one address, then another object
    o.size = 256 * 1024;
    o.site = 0;
    o.thread_mask = 1;
    o.misses[kConf] = misses[s - 1];
    o.misses[kCap] = 99;  // another kind: not the finding's
    p.objects.push_back(o);
    r.objects[s - 1] = s;
  }
  r.object_count = 4;
  p.instructions.push_back(r);
  p.sites.push_back(SiteRecord{{0x401000}, 1, 0});
  p.counters[0].by_kind[0][0] = 35000;
  p.counters[0].by_kind[kConf][0] = 5000;

  const std::string text = render(p, Format::Text);
  EXPECT_EQ(count(text, "heap object of 262144 bytes at 0x7f0000010010,"), 1u) << text;
  EXPECT_EQ(count(text, "heap object of 262144 bytes at 0x7f0000051010,"), 1u) << text;
  EXPECT_NE(text.find("at 0x7f0000010010, allocated 3 times by thread 0 at make  c.c:7, missed by threads 0  "
                      "[3,600 L1 conflict misses]"), std::string::npos) << text;
  EXPECT_NE(text.find("at 0x7f0000051010, allocated by thread 0 at make  c.c:7, missed by threads 0  "
                      "[1,400 L1 conflict misses]"), std::string::npos) << text;
  // Most missed first.
  EXPECT_LT(text.find("0x7f0000010010,"), text.find("0x7f0000051010,"));

  const std::string json = render(p, Format::Json);
  EXPECT_EQ(count(json, "\"alloc_site\""), 2u) << json;
  EXPECT_NE(json.find("\"allocations\": 3"), std::string::npos) << json;
  EXPECT_NE(json.find("\"l1_misses\": 3600"), std::string::npos) << json;
  EXPECT_NE(json.find("\"l1_misses\": 1400"), std::string::npos) << json;
}

// Item 5: misses of an inlined helper count at the line of the function it was inlined into,
// as cachegrind counts them, and the helper stays visible beside that line.
TEST(Report, InlinedHelperCountsAtItsCallersLine) {
  Profile p = three_levels();
  InstructionRecord helper = instr(0x842, 80000);  // inlined read64 at c.c:120
  helper.misses[0][kCap] = 20000;
  InstructionRecord own = instr(0x401078, 80000);  // sum()'s own code at c.c:120 (0x78)
  own.misses[0][kCap] = 5000;
  InstructionRecord elsewhere = instr(0x401005, 1000);  // c.c:5: not mem.h:5
  elsewhere.misses[0][kCap] = 10;
  p.instructions = {helper, own, elsewhere};
  p.counters[0].by_kind[0][0] = 136000;
  p.counters[0].by_kind[kCap][0] = 25010;

  const std::string text = render(p, Format::Text);
  const size_t table = text.find("Source lines by L1 misses");
  ASSERT_NE(table, std::string::npos) << text;
  const std::string lines = text.substr(table);
  // One row for c.c:120 with both instructions' misses, the helper named beside it.
  EXPECT_NE(lines.find("160,000       25,000            0            0  sum  c.c:120 via read64 (mem.h:5)\n"),
            std::string::npos) << lines;
  EXPECT_EQ(lines.find("read64  mem.h:5"), std::string::npos) << "a row of its own for the helper: " << lines;
  EXPECT_EQ(count(lines, "c.c:120"), 1u) << lines;
  EXPECT_NE(text.find("   code: sum  c.c:120 via read64 (mem.h:5)  [0x842, 20,000 misses]"), std::string::npos)
      << text;

  const std::string json = render(p, Format::Json);
  const size_t sl = json.find("\"source_lines\"");
  ASSERT_NE(sl, std::string::npos);
  const std::string row = json.substr(sl, json.find('}', json.find("\"misses\"", sl)) - sl);
  EXPECT_NE(row.find("\"function\": \"sum\",\n      \"file\": \"/src/c.c\",\n      \"line\": 120"), std::string::npos)
      << row;
  const size_t frames = row.find("\"frames\"");
  ASSERT_NE(frames, std::string::npos) << row;
  EXPECT_LT(row.find("\"read64\"", frames), row.find("\"sum\"", frames)) << "innermost first: " << row;
}

// Objects allocated at site 0 are a struct stats: `sent` at 40..47 and `received` at 64..71,
// apart in two 64-byte lines at a 128-aligned start; other sites are of unknown type.
class StatsTypes : public analysis::TypeOracle {
 public:
  analysis::DataType stats{"struct stats", 512,
                           {{"name[]", 0, 40}, {"sent", 40, 8}, {"flags[]", 48, 16},
                            {"received", 64, 8}, {"rest[]", 72, 440}}};
  const analysis::DataType* heap_type(const Profile&, const ObjectRecord& o) override {
    return o.site == 0 ? &stats : nullptr;
  }
  const analysis::DataType* global_type(uint64_t, uint64_t*) override { return nullptr; }
};

// Thread 0 writes `sent`, thread 1 `received`, taking turns: no false sharing today, false
// sharing once the object moves by 24..56 bytes (analysis/predict.h), allocated at `site`.
Profile latent_stats(uint32_t site) {
  Profile p = three_levels();
  constexpr uint64_t kStart = 0x7f0000010000;  // 128-byte aligned
  std::vector<uint64_t> log;
  for (int i = 0; i < 1000; ++i) {
    log.push_back(access_log_pack(kStart + 40, 8, true, 0));
    log.push_back(access_log_pack(kStart + 64, 8, true, 1));
  }
  AccessLogRecord info{};
  info.kept = info.capacity = info.total = log.size();
  info.line = 64;
  p.access_log = std::move(log);
  p.access_log_info = {info};
  p.meta.accesses = info.total;
  ObjectRecord o{};
  o.serial = 1;
  o.start = kStart;
  o.size = 512;
  o.site = site;
  p.objects.push_back(o);
  p.sites.push_back(SiteRecord{{0x401000}, 1, 0});
  p.sites.push_back(SiteRecord{{0x402000}, 1, 0});
  return p;
}

// Issue #16 item 2: each latent false-sharing case names the object's type and, per thread, the
// fields its bytes cover (in JSON in the order of "threads", in text after each thread's bytes).
TEST(Report, LatentFalseSharingNamesEachThreadsFields) {
  StatsTypes types;
  const Profile p = latent_stats(0);
  const auto doc = nlohmann::json::parse(render(p, Format::Json, types));
  ASSERT_TRUE(doc.contains("latent_false_sharing")) << doc.dump(1);
  const auto& cases = doc["latent_false_sharing"];
  ASSERT_FALSE(cases.empty()) << doc.dump(1);
  for (const auto& c : cases) {
    EXPECT_EQ(c["type"], "struct stats") << c.dump(1);
    EXPECT_EQ(c["threads"], nlohmann::json::parse("[0, 1]")) << c.dump(1);
    EXPECT_EQ(c["fields"], nlohmann::json::parse(R"([["sent"], ["received"]])")) << c.dump(1);
  }
  const std::string text = render(p, Format::Text, types);
  EXPECT_NE(text.find("heap object of 512 bytes (struct stats) at 0x7f0000010000"), std::string::npos) << text;
  EXPECT_NE(text.find("\n      thread 0 writes 40-47 (sent)\n      thread 1 writes 64-71 (received)\n"),
            std::string::npos) << text;
}

TEST(Report, LatentFalseSharingOfUnknownTypeNamesNoFields) {
  StatsTypes types;
  const Profile p = latent_stats(1);  // a site the oracle does not know
  const auto doc = nlohmann::json::parse(render(p, Format::Json, types));
  ASSERT_FALSE(doc["latent_false_sharing"].empty()) << doc.dump(1);
  for (const auto& c : doc["latent_false_sharing"]) {
    EXPECT_FALSE(c.contains("type")) << c.dump(1);
    EXPECT_FALSE(c.contains("fields")) << c.dump(1);
  }
  const std::string text = render(p, Format::Text, types);
  EXPECT_NE(text.find("heap object of 512 bytes at 0x7f0000010000"), std::string::npos) << text;
  EXPECT_NE(text.find("\n      thread 0 writes 40-47\n      thread 1 writes 64-71\n"), std::string::npos) << text;
  // No debug information at all (NoTypes): the same.
  EXPECT_EQ(render(latent_stats(0), Format::Text), text);
}

}  // namespace
}  // namespace whymiss::report
