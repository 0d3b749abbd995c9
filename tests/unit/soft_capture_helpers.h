// Helpers shared by the capture-stage tests (hardware/emulated and int3): feeding samples to the
// stage and reading its exports back.
#pragma once
#include <gtest/gtest.h>
#include <time.h>

#include <cstdint>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/estimate.h"
#include "model/profile.h"
#include "runtime/soft/capture.h"

namespace whymiss::soft::capture_test {

inline uint64_t now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}
inline uint64_t u(const void* p) { return reinterpret_cast<uint64_t>(p); }

// Reports `times` identical 8-byte samples of instruction `ip` at `addr` by `thread`.
inline void sample(const void* ip, uint64_t addr, uint32_t thread, uint8_t flags, int times = 1) {
  profile::SampleRecord s{};
  s.time_ns = now();
  s.ip = u(ip);
  s.addr = addr;
  s.thread = thread;
  s.size = 8;
  s.flags = flags;
  s.level = profile::kLevelUnknown;
  for (int i = 0; i < times; ++i) capture::note_sample(s);
}

inline std::vector<profile::WindowRecord> windows() {
  std::vector<profile::WindowRecord> w(capture::window_count());
  w.resize(capture::export_windows(w.data(), w.size()));
  return w;
}
inline std::vector<profile::CaptureRecord> captures() {
  std::vector<profile::CaptureRecord> c(capture::capture_count());
  c.resize(capture::export_captures(c.data(), c.size()));
  return c;
}

// The end of both column-walk tests (hardware/emulated and int3): the stage's exports are the
// 256 first accesses of the walk over the global double m[64][1024], 8 columns of 64 rows, in
// order, and the profile they complete estimates and analyses as an application conflict at L1
// backed by that one window.
inline void expect_column_walk_conflict(profile::Profile& p, const double (*m)[1024]) {
  p.windows = windows();
  p.captures = captures();
  ASSERT_EQ(p.captures.size(), 256u);
  for (size_t i = 0; i < p.captures.size(); ++i) ASSERT_EQ(p.captures[i].addr, u(&m[i % 64][i / 64])) << i;

  Status st = analysis::estimate(p);
  ASSERT_TRUE(st.ok()) << st.error();
  const analysis::Analysis a = analysis::analyze(p);
  ASSERT_FALSE(a.findings.empty()) << (a.notes.empty() ? "" : a.notes[0]);
  EXPECT_STREQ(analysis::kind_name(a.findings[0].kind), analysis::kind_name(analysis::Kind::Conflict));
  EXPECT_STREQ(analysis::origin_name(a.findings[0].origin), analysis::origin_name(analysis::Origin::Application));
  EXPECT_EQ(a.findings[0].level, 0);
  EXPECT_EQ(analysis::support(p, a.findings[0]).windows, 1u);
  EXPECT_EQ(analysis::support(p, a.findings[0]).captures, 256u);
}

}  // namespace whymiss::soft::capture_test
