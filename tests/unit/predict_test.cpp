// What-if replays of a hand-built access log (analysis/predict.h): a fix's effect, latent false
// sharing at the placements the layout implies and nowhere else, scaling of a partial log, and
// the log's sections surviving the profile format.
#include <gtest/gtest.h>

#include <set>

#include "analysis/predict.h"

namespace whymiss::analysis {
namespace {

using profile::access_log_pack;
constexpr uint64_t kBase = 0x10000;  // 128-byte aligned

profile::Profile base_profile() {
  profile::Profile p;
  p.meta.mode = uint32_t(profile::Mode::Exact);
  p.geometry.levels = {{"L1", 32 * 1024, 8, 64}, {"L2", 256 * 1024, 8, 64}};
  return p;
}

void set_log(profile::Profile& p, std::vector<uint64_t> log, uint64_t total = 0) {
  profile::AccessLogRecord r{};
  r.kept = log.size();
  r.capacity = log.size();
  r.total = total ? total : log.size();
  r.line = 64;
  p.access_log = std::move(log);
  p.access_log_info = {r};
  p.meta.accesses = r.total;
}

// Two threads take turns writing 8 bytes each at object offsets `a` and `b`, `rounds` times.
std::vector<uint64_t> turns(uint64_t a, uint64_t b, int rounds) {
  std::vector<uint64_t> log;
  for (int i = 0; i < rounds; ++i) {
    log.push_back(access_log_pack(kBase + a, 8, true, 0));
    log.push_back(access_log_pack(kBase + b, 8, true, 1));
  }
  return log;
}

Finding sharing_finding(uint64_t line_addr) {
  Finding f;
  f.kind = Kind::FalseSharing;
  f.level = 0;
  f.line_addr = line_addr;
  f.lines = 1;
  return f;
}

TEST(Predict, PackedEntriesRoundTrip) {
  const uint64_t e = access_log_pack(0x7fff12345678, 8, true, 131);
  EXPECT_EQ(profile::log_addr(e), 0x7fff12345678u);
  EXPECT_EQ(profile::log_size(e), 8u);
  EXPECT_TRUE(profile::log_write(e));
  EXPECT_EQ(profile::log_thread(e), 131u % 128);
  EXPECT_EQ(profile::log_size(access_log_pack(0, 4096, false, 0)), 256u);
}

TEST(Predict, FalseSharingFixMovesEachThreadsBytesToItsOwnLine) {
  profile::Profile p = base_profile();
  set_log(p, turns(0, 8, 1000));  // one line, every write invalidates the other core's copy
  const Predictions pr = predict(p, {sharing_finding(kBase)});
  ASSERT_TRUE(pr.have_log);
  ASSERT_EQ(pr.fixes.size(), 1u);
  const PredictedFix& fx = pr.fixes[0];
  ASSERT_TRUE(fx.available) << fx.why_not;
  EXPECT_TRUE(fx.replayed);
  EXPECT_EQ(fx.misses_before, 2000u);  // every write misses
  EXPECT_EQ(fx.misses_after, 2u);      // each thread's first touch of its own line
  EXPECT_EQ(fx.kind_after, 0u);
  EXPECT_GE(fx.kind_before, 1990u);
  EXPECT_EQ(fx.how, "replayed (every access)");
}

TEST(Predict, PartialLogIsScaledToTheRun) {
  profile::Profile p = base_profile();
  set_log(p, turns(0, 8, 1000), 8000);  // the log kept a quarter of the run
  const PredictedFix fx = predict(p, {sharing_finding(kBase)}).fixes[0];
  ASSERT_TRUE(fx.available);
  EXPECT_EQ(fx.misses_before, 8000u);
  EXPECT_EQ(fx.misses_after, 8u);
  EXPECT_NE(fx.how.find("first 25 %"), std::string::npos) << fx.how;
}

TEST(Predict, NoLogNoReplay) {
  profile::Profile p = base_profile();
  const Predictions pr = predict(p, {sharing_finding(kBase)});
  EXPECT_FALSE(pr.have_log);
  EXPECT_FALSE(pr.fixes[0].available);
  EXPECT_FALSE(pr.fixes[0].why_not.empty());
  EXPECT_TRUE(pr.latent.empty());
}

profile::Profile latent_profile(uint64_t a, uint64_t b) {
  profile::Profile p = base_profile();
  set_log(p, turns(a, b, 1000));
  profile::ObjectRecord o{};
  o.serial = 1;
  o.start = kBase;
  o.size = 512;
  o.site = profile::kNoSite;
  p.objects.push_back(o);
  return p;
}

TEST(Predict, LatentFalseSharingAtThePlacementsTheLayoutImplies) {
  // a at 40..47, b at 64..71: apart today; together once moved by 24..56 bytes, and in one
  // 128-byte line at today's (128-aligned) placement but not 64 bytes further.
  const Predictions pr = predict(latent_profile(40, 64), {});
  std::set<std::pair<std::string, uint32_t>> got;
  for (const auto& l : pr.latent) {
    got.insert({l.trigger, l.offset});
    EXPECT_EQ(l.today_misses, 0u);
    EXPECT_GE(l.predicted_misses, 1990u) << l.trigger;  // every write but the first two
    EXPECT_LE(l.predicted_misses, 2000u) << l.trigger;
    EXPECT_EQ(l.threads, (std::vector<uint32_t>{0, 1}));
    EXPECT_EQ(l.bytes[0], "writes 40-47");
    EXPECT_EQ(l.bytes[1], "writes 64-71");
    using Spans = std::vector<std::pair<uint64_t, uint64_t>>;
    EXPECT_EQ(l.spans, (std::vector<Spans>{{{40, 48}}, {{64, 72}}}));  // [begin, end) per thread
  }
  const std::set<std::pair<std::string, uint32_t>> want = {
      {"offset 24", 24}, {"offset 32", 32}, {"offset 40", 40}, {"offset 48", 48},
      {"offset 56", 56}, {"line 128", 0}};
  EXPECT_EQ(got, want);
}

TEST(Predict, NoLatentFalseSharingWhereNoPlacementJoinsTheFields) {
  EXPECT_TRUE(predict(latent_profile(0, 256), {}).latent.empty());
}

TEST(Predict, TodaysFalseSharingIsNotLatent) {
  // Already in one line: a real finding, not a latent one (moving it can only separate them).
  EXPECT_TRUE(predict(latent_profile(0, 8), {}).latent.empty());
}

TEST(Predict, CapacityFixIsTheSizeTheCurveSaysRemovesTheMisses) {
  // 1,100 accesses of one instruction: 100 first touches, 1,000 reuses at a distance of 1,000
  // lines (64,000 bytes). A 32 KiB L1 misses all of them; 64 KiB (1,024 lines) holds the reuses.
  profile::Profile p = base_profile();
  profile::InstructionRecord ir{};
  ir.ip = 0x401000;
  ir.accesses[0] = 1100;
  p.instructions.push_back(ir);
  profile::ReuseRecord r{};
  r.key = ir.ip;
  r.scope = profile::kReuseInstruction;
  r.line_bytes = 64;
  r.rate = 1;
  r.cold = 100;
  r.buckets[profile::reuse_bucket(1000)] = 1000;
  r.weighted = 1100;
  p.reuse.push_back(r);
  Finding f;
  f.kind = Kind::Capacity;
  f.level = 0;
  f.misses = 1000;
  f.instructions.push_back({ir.ip, 1000});
  const PredictedFix fx = predict(p, {f}).fixes[0];  // no log needed
  ASSERT_TRUE(fx.available) << fx.why_not;
  EXPECT_FALSE(fx.replayed);
  EXPECT_EQ(fx.cache_size, 64u * 1024);
  EXPECT_EQ(fx.misses_before, 1100u);
  EXPECT_EQ(fx.misses_after, 100u);
  EXPECT_EQ(fx.how.rfind("modelled", 0), 0u) << fx.how;
}

TEST(Predict, LogSurvivesTheProfileFormat) {
  profile::Profile p = latent_profile(40, 64);
  p.counters.resize(2);
  auto back = profile::parse_profile(reinterpret_cast<const uint8_t*>(profile::encode_profile(p).data()),
                                     profile::encode_profile(p).size(), "test");
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back.value().access_log, p.access_log);
  ASSERT_EQ(back.value().access_log_info.size(), 1u);
  EXPECT_EQ(back.value().access_log_info[0].total, 2000u);
  // A description that does not match its entries is refused.
  p.access_log_info[0].kept = 5;
  const std::string bytes = profile::encode_profile(p);
  EXPECT_FALSE(profile::parse_profile(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "test"));
}

}  // namespace
}  // namespace whymiss::analysis
