// The progress page: how far an exact-mode recording has got, for `whymiss record` and `run` to
// show on a terminal while a long program runs (issue #20 item 7).
//
// The recording tool creates the file (kSize bytes, zeroed, mode 0600) in its private raw
// directory, writes kMagic, and names it in WHYMISS_PROGRESS only when it will show progress
// (its stderr is a terminal). The exact runtime maps it MAP_SHARED at start and, from the CPU-time
// sampler's signal handler (runtime/exact/cpu_sampler.h: every 10 ms of each thread's CPU
// time), adds what the interrupted thread simulated since its last tick to `accesses`: no store
// on the access path. The tool only reads. A page without kMagic is ignored by the runtime.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace whymiss::progress {

inline constexpr uint64_t kMagic = 0x3173736572676f72ull;  // "rogress1"
inline constexpr size_t kSize = 4096;

struct Page {
  uint64_t magic;                  // kMagic, written by the tool before the program starts
  std::atomic<uint64_t> accesses;  // simulated so far (approximate: ticks lag by <= 10 ms of CPU)
  std::atomic<uint64_t> attached;  // runtimes that mapped the page (one more per exec'd image)
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared between processes");
static_assert(sizeof(Page) <= kSize);

}  // namespace whymiss::progress
