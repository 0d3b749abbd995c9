// Work exact mode cannot see (analysis/unseen.h, report/unseen.h, symbols/instrumented.h): CPU-time
// samples attributed to modules, the share outside instrumented code, and where the report says it.
#include <gtest/gtest.h>

#include <sstream>

#include "analysis/analysis.h"
#include "analysis/unseen.h"
#include "report/report.h"
#include "symbols/instrumented.h"

namespace whymiss {
namespace {

using analysis::CodeKind;
using namespace profile;

constexpr uint64_t kMain = 0x400000, kLibz = 0x7f0000000000, kLibc = 0x7f1000000000, kRt = 0x7f2000000000;

Profile synthetic() {
  Profile p;
  p.meta.mode = uint32_t(Mode::Exact);
  p.meta.exited = 1;
  p.geometry.levels = {{"L1", 48 * 1024, 12, 64}, {"L2", 1 << 20, 16, 64}};
  p.counters.resize(2);
  auto mod = [&](uint64_t start, const char* path) {
    Profile::Module m{};
    m.rec.start = m.rec.load_bias = start;
    m.rec.end = start + 0x100000;
    m.path = path;
    p.modules.push_back(m);
  };
  mod(kLibc, "/lib/x86_64-linux-gnu/libc.so.6");  // (not sorted by address, on purpose)
  mod(kMain, "/home/u/pigz");
  mod(kRt, "/opt/whymiss/lib/libwhymiss-rt.so");
  mod(kLibz, "/lib/x86_64-linux-gnu/libz.so.1");
  CpuSamplingRecord s{};
  s.period_ns = 10'000'000;
  s.clock = uint32_t(CpuClock::ThreadCpuTimer);
  p.cpu_sampling.push_back(s);
  return p;
}
const std::vector<CodeKind> kKinds = {CodeKind::NotInstrumented, CodeKind::Instrumented,
                                      CodeKind::WhymissRuntime, CodeKind::NotInstrumented};

void add(Profile& p, uint64_t ip, int n, uint32_t flags = 0) {
  for (int i = 0; i < n; ++i) p.cpu_samples.push_back({uint64_t(i) * 1000, ip + uint64_t(i), uint32_t(i % 2), flags});
  p.cpu_sampling[0].taken = p.cpu_samples.size();
}

// pigz's shape: libz takes most of the time; whymiss's own runtime does not count.
Profile pigz() {
  Profile p = synthetic();
  add(p, kMain + 0x100, 10);
  add(p, kLibz + 0x2000, 85);
  add(p, kLibc + 0x300, 5);
  add(p, kRt + 0x10, 50);                             // in the runtime's library
  add(p, kLibc + 0x400, 20, kCpuSampleInRuntime);     // in libc, called by the runtime
  add(p, 0x10, 3);                                    // outside every module
  return p;
}

TEST(UnseenWork, AttributesSamplesToModulesAndLeavesWhymissOut) {
  const analysis::UnseenWork u = analysis::unseen_work(pigz(), kKinds);
  ASSERT_TRUE(u.measured);
  EXPECT_EQ(u.period_ns, 10'000'000u);
  EXPECT_EQ(u.samples, 103u);
  EXPECT_EQ(u.whymiss_samples, 70u);
  EXPECT_EQ(u.instrumented_samples, 10u);
  EXPECT_EQ(u.unseen_samples, 93u);
  EXPECT_NEAR(u.unseen_share, 93.0 / 103.0, 1e-9);
  ASSERT_EQ(u.modules.size(), 3u);
  EXPECT_EQ(u.modules[0].path, "/lib/x86_64-linux-gnu/libz.so.1");
  EXPECT_EQ(u.modules[0].samples, 85u);
  EXPECT_NEAR(u.modules[0].share, 85.0 / 103.0, 1e-9);
  EXPECT_FALSE(u.modules[0].partly_seen);
  EXPECT_EQ(u.modules[1].path, "/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_TRUE(u.modules[1].partly_seen);
  EXPECT_EQ(u.modules[2].path, "");  // outside every module
  EXPECT_TRUE(u.enough);
  EXPECT_TRUE(u.warn);
}

TEST(UnseenWork, AllInstrumentedIsNoWarning) {
  Profile p = synthetic();
  add(p, kMain + 0x100, 100);
  add(p, kLibc + 0x300, 2);
  add(p, kRt, 400);
  const analysis::UnseenWork u = analysis::unseen_work(p, kKinds);
  EXPECT_TRUE(u.enough);
  EXPECT_FALSE(u.warn);
  EXPECT_NEAR(u.unseen_share, 2.0 / 102.0, 1e-9);
}

TEST(UnseenWork, TooFewSamplesTellNothing) {
  Profile p = synthetic();
  add(p, kLibz, 3);
  const analysis::UnseenWork u = analysis::unseen_work(p, kKinds);
  EXPECT_FALSE(u.enough);
  EXPECT_FALSE(u.warn);
}

TEST(UnseenWork, OlderProfilesAreNotMeasured) {
  Profile p = synthetic();
  p.cpu_sampling.clear();
  EXPECT_FALSE(analysis::unseen_work(p, kKinds).measured);
}

TEST(UnseenWork, ModulesWithoutAKindAreUnreadable) {
  Profile p = synthetic();
  add(p, kLibz, 10);
  const analysis::UnseenWork u = analysis::unseen_work(p, {});  // nobody could tell
  ASSERT_EQ(u.modules.size(), 1u);
  EXPECT_EQ(u.modules[0].kind, CodeKind::Unreadable);
  EXPECT_TRUE(u.warn);
}

class NoNames : public report::Namer {
 public:
  report::CodeLoc code(uint64_t) override { return {"??", "", 0}; }
  std::optional<report::DataName> global(uint64_t) override { return std::nullopt; }
  report::CodeLoc site(const SiteRecord&) override { return {"??", "", 0}; }
};

std::string render(const Profile& p, report::Format f) {
  analysis::Analysis a = analysis::analyze(p);
  a.unseen = analysis::unseen_work(p, kKinds);
  NoNames n;
  report::Options o;
  o.format = f;
  std::ostringstream out;
  analysis::NoTypes types;
  report::write_report(out, p, a, n, types, o);
  return out.str();
}

TEST(UnseenReport, TextWarnsRightAfterTheTitle) {
  const std::string text = render(pigz(), report::Format::Text);
  std::istringstream in(text);
  std::string title, second;
  std::getline(in, title);
  std::getline(in, second);
  EXPECT_NE(title.find("every instrumented access"), std::string::npos) << title;
  EXPECT_EQ(second.rfind("warning: 90% of the program's CPU time ran in code whymiss-cc did not instrument: "
                         "libz.so.1 (83%), libc.so.6 (5%; partly seen: ", 0), 0u) << second;
  EXPECT_NE(second.find("code outside every loaded module (3%)"), std::string::npos) << second;
  EXPECT_NE(second.find("`whymiss run --mode soft`"), std::string::npos) << second;
  EXPECT_NE(second.find("[sampled: 103 samples, one per 10 ms of a thread's CPU time, 70 more in whymiss's runtime"),
            std::string::npos) << second;
  EXPECT_EQ(text.find("cpu time: "), std::string::npos);  // the warning replaces the header line
}

TEST(UnseenReport, TextHeaderLineWithoutWarning) {
  Profile p = synthetic();
  add(p, kMain + 0x100, 100);
  add(p, kLibc + 0x300, 2);
  const std::string text = render(p, report::Format::Text);
  EXPECT_EQ(text.find("did not instrument"), std::string::npos);
  EXPECT_NE(text.find("cpu time: 98% of the program's CPU time ran in instrumented code; outside it: libc.so.6 (2%;"),
            std::string::npos) << text;
}

TEST(UnseenReport, OlderProfilesSayNothing) {
  Profile p = synthetic();
  p.cpu_sampling.clear();
  const std::string text = render(p, report::Format::Text);
  EXPECT_EQ(text.find("cpu time"), std::string::npos);
  EXPECT_EQ(render(p, report::Format::Json).find("cpu_time"), std::string::npos);
}

TEST(UnseenReport, JsonCarriesTheShareBeforeTheTotals) {
  const std::string json = render(pigz(), report::Format::Json);
  const size_t cpu = json.find("\"cpu_time\"");
  ASSERT_NE(cpu, std::string::npos);
  EXPECT_LT(cpu, json.find("\"totals\""));
  EXPECT_NE(json.find("\"how\": \"sampled\"", cpu), std::string::npos) << json;
  EXPECT_NE(json.find("\"warning\": true", cpu), std::string::npos) << json;
  EXPECT_NE(json.find("\"module\": \"libz.so.1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"uninstrumented_share\": 0.9029"), std::string::npos) << json;
}

TEST(UnseenProfile, SectionsRoundTrip) {
  const Profile p = pigz();
  const std::string bytes = encode_profile(p);
  auto q = parse_profile(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem");
  ASSERT_TRUE(q) << q.error();
  ASSERT_EQ(q->cpu_sampling.size(), 1u);
  EXPECT_EQ(q->cpu_sampling[0].period_ns, 10'000'000u);
  ASSERT_EQ(q->cpu_samples.size(), p.cpu_samples.size());
  EXPECT_EQ(q->cpu_samples[150].flags, kCpuSampleInRuntime);
}

TEST(ModuleInstrumentation, TellsTheRuntimeAPlainFileAndAMissingOne) {
  using symbols::Instrumentation;
  EXPECT_EQ(symbols::module_instrumentation(WHYMISS_BINARY_DIR "/lib/libwhymiss-rt.so"),
            Instrumentation::WhymissRuntime);
  EXPECT_EQ(symbols::module_instrumentation("/proc/self/exe"), Instrumentation::NotInstrumented);
  EXPECT_EQ(symbols::module_instrumentation("/nonexistent/libz.so.1"), Instrumentation::Unreadable);
  EXPECT_EQ(symbols::module_instrumentation(WHYMISS_SOURCE_DIR "/README.md"), Instrumentation::Unreadable);
}

}  // namespace
}  // namespace whymiss
