// Helpers shared by the capture-stage tests (hardware/emulated and int3): feeding samples to the
// stage and reading its exports back.
#pragma once
#include <time.h>

#include <cstdint>
#include <vector>

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

}  // namespace whymiss::soft::capture_test
