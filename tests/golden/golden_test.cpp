// Recorded profiles → analysis → report, compared with the expected reports beside them.
// Names come from a fixed namer (no binaries needed), so only analysis and rendering are under
// test. After an intended change, regenerate with WHYMISS_UPDATE_GOLDEN=1 and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "analysis/analysis.h"
#include "analysis/estimate.h"
#include "model/profile.h"
#include "report/report.h"

namespace whymiss {
namespace {

class FixedNamer : public report::Namer {
 public:
  report::CodeLoc code(uint64_t ip) override {
    char b[32];
    std::snprintf(b, sizeof b, "fn_%llx", (unsigned long long)(ip & 0xfff));
    return {b, "prog.c", uint32_t(ip & 0xff)};
  }
  std::optional<report::DataName> global(uint64_t addr) override {
    return report::DataName{"global_" + std::to_string(addr & 0xfff), addr & ~uint64_t(63), 64};
  }
  report::CodeLoc site(const profile::SiteRecord& s) override {
    return s.depth ? code(s.frames[0]) : report::CodeLoc{"??", "", 0};
  }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class Golden : public ::testing::TestWithParam<const char*> {};

TEST_P(Golden, ReportMatches) {
  const std::string base = std::string(WHYMISS_SOURCE_DIR) + "/tests/golden/" + GetParam();
  auto p = profile::read_profile(base + ".data");
  ASSERT_TRUE(p.ok()) << p.error();
  auto st = analysis::estimate(*p);  // sampled profiles; exact ones are left alone
  ASSERT_TRUE(st.ok()) << st.error();
  analysis::Analysis a = analysis::analyze(*p);
  for (report::Format fmt : {report::Format::Text, report::Format::Json}) {
    FixedNamer names;
    report::Options o;
    o.format = fmt;
    std::ostringstream out;
    analysis::NoTypes types;
    report::write_report(out, *p, a, names, types, o);
    const std::string expected_path = base + (fmt == report::Format::Json ? ".json" : ".txt");
    if (std::getenv("WHYMISS_UPDATE_GOLDEN")) {
      std::ofstream(expected_path) << out.str();
      continue;
    }
    EXPECT_EQ(out.str(), slurp(expected_path))
        << "the report of " << GetParam() << " changed; if intended, rerun with "
        << "WHYMISS_UPDATE_GOLDEN=1 and review the diff of " << expected_path;
  }
}

INSTANTIATE_TEST_SUITE_P(Recorded, Golden,
                         ::testing::Values("false_sharing_alloc", "conflict_alloc", "capacity",
                                           "true_sharing", "control"));
// Synthetic soft-mode profiles (written by estimate_test with WHYMISS_WRITE_SOFT_GOLDEN=DIR).
INSTANTIATE_TEST_SUITE_P(Sampled, Golden,
                         ::testing::Values("soft_false_sharing_alloc", "soft_conflict_alloc"));

}  // namespace
}  // namespace whymiss
