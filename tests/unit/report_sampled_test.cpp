// Header lines of the sampled-profile report: counts read as English ("1 window", "2 windows").
#include <gtest/gtest.h>

#include <sstream>

#include "model/profile.h"
#include "report/sampled.h"

namespace whymiss::report::sampled {
namespace {

profile::Profile soft_profile(size_t windows, size_t captures) {
  profile::Profile p;
  p.meta.mode = uint32_t(profile::Mode::Soft);
  p.meta.sample_source = uint32_t(profile::SampleSource::TaskClock);
  p.meta.capture_backend = uint32_t(profile::CaptureBackend::Int3);
  p.windows.resize(windows);
  p.captures.resize(captures);
  return p;
}

std::string header(const profile::Profile& p) {
  std::ostringstream out;
  text_header(out, p);
  return out.str();
}

TEST(ReportSampled, OneWindowAndOneCaptureAreSingular) {
  const std::string h = header(soft_profile(1, 1));
  EXPECT_NE(h.find("1 window, 1 capture\n"), std::string::npos) << h;
  EXPECT_EQ(h.find("1 windows"), std::string::npos) << h;
}

TEST(ReportSampled, OtherCountsArePluralWithThousands) {
  const std::string h = header(soft_profile(2, 1024));
  EXPECT_NE(h.find("2 windows, 1,024 captures"), std::string::npos) << h;
  EXPECT_NE(header(soft_profile(0, 0)).find("0 windows, 0 captures"), std::string::npos);
}

}  // namespace
}  // namespace whymiss::report::sampled
