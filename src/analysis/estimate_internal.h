// Working state of the estimator (estimate.cpp); not part of the interface.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "model/profile.h"

namespace whymiss::analysis::est {

// What the samples and captures say about one cache line: per thread, the bytes it read and
// wrote (granules of max(1, line/64) bytes, as LineRecord), and who captured it.
struct LineUse {
  struct Masks {
    uint64_t read = 0, write = 0;
  };
  std::map<uint32_t, Masks> threads;
  std::set<uint32_t> capture_threads;
  bool written = false;
  bool shared = false;  // >= min threads and a write among them

  void add(uint32_t thread, uint64_t offset, uint16_t size, uint8_t flags, uint32_t line, uint64_t,
           bool capture) {
    const uint32_t g = std::max<uint32_t>(1, line / 64);
    uint64_t mask = 0;
    const uint64_t end = std::min<uint64_t>(line, offset + std::max<uint16_t>(1, size));
    for (uint64_t b = offset / g; b * g < end && b < 64; ++b) mask |= uint64_t(1) << b;
    Masks& m = threads[thread];
    if (flags & profile::kAccessWrite) m.write |= mask, written = true;
    if (flags & profile::kAccessRead || !(flags & profile::kAccessWrite)) m.read |= mask;
    if (capture) capture_threads.insert(thread);
  }
};

// One instruction: its samples, the window replay's tallies, reuse evidence and the estimate.
struct Ins {
  uint64_t ip = 0;
  uint64_t reads = 0, writes = 0;
  std::vector<uint32_t> samples;  // indices into Profile::samples
  uint64_t sample_replayed = 0;   // samples decided by the shared-line replay
  // Window replay: captures, outcome counts per level (first touches kept apart).
  uint64_t captures = 0, first_touch = 0;
  double rep[profile::kLevels][profile::kKinds] = {};
  std::map<uint64_t, double[2]> rep_line_coh;  // line -> coherence captures [TS, FS] at L1
  std::vector<uint64_t> first_touch_objs, first_touch_addrs;
  // Reuse evidence.
  int64_t sample_fwd = 0, sample_back = 0, cap_fwd = 0, cap_back = 0;
  uint64_t span = 0;
  // The estimate, in samples.
  double miss[profile::kLevels][profile::kKinds] = {};
  double mdl[profile::kLevels][profile::kKinds] = {};  // the per-instruction model's part of miss
  std::map<uint64_t, double[profile::kKinds]> obj_miss;  // L1 misses per object serial
  std::map<uint64_t, uint64_t> obj_threads, obj_sets;
  // Where its misses landed.
  uint64_t set_mask = 0;
  std::vector<uint64_t> miss_objs, miss_addrs;
  uint64_t l1_sets = 64;
  uint32_t line = 64;

  void note_miss(uint64_t object, uint64_t addr) {
    const uint64_t set = (addr / line) % l1_sets;
    set_mask |= uint64_t(1) << (set % 64);
    if (object) {
      if (std::find(miss_objs.begin(), miss_objs.end(), object) == miss_objs.end()) miss_objs.push_back(object);
      obj_sets[object] |= uint64_t(1) << (set % 64);
    }
    if (miss_addrs.size() < profile::kRefs &&
        std::none_of(miss_addrs.begin(), miss_addrs.end(), [&](uint64_t a) { return a / line == addr / line; }))
      miss_addrs.push_back(addr);
  }
};

// What an instruction's samples say about reuse (estimate.h, "Reuse evidence"): per (thread,
// object) in time order, forward and backward steps of its position (offset in its heap object;
// the address for other data), and the largest span a forward run covered before stepping back,
// bounded by the object's size: a lower bound of how far apart the sweep's reuses are.
struct Sweep {
  int64_t fwd = 0, back = 0;
  uint64_t span = 0;
  // A sweep that came back: samples farther apart than one pass of it land at unrelated points
  // and step forward or back about equally often, so a sweep is refuted only when backward steps
  // clearly dominate (a densely sampled backward sweep steps back nearly every time).
  bool sweeps() const { return back > 0 && 2 * fwd >= back; }
};
std::map<uint64_t, Sweep> sample_sweeps(const profile::Profile& p);

// Names in `r` the heap objects overlapping its line that cover a granule in `touched` (every
// thread's read and write masks or-ed: the record keeps only its first kLineThreads threads').
// Without masks (touched 0) every overlapping object counts.
void name_line_objects(const std::vector<profile::ObjectRecord>& objects, uint32_t line, uint64_t touched,
                       profile::LineRecord& r);

// A thread's (read, write) granules, as the two estimators keep them.
inline std::pair<uint64_t, uint64_t> read_write(const LineUse::Masks& m) { return {m.read, m.write}; }
inline std::pair<uint64_t, uint64_t> read_write(const std::pair<uint64_t, uint64_t>& m) { return m; }

// Fills r's threads from `threads` (thread -> masks, in thread order): the first kLineThreads
// with their masks, the count of all, and the objects of the line any of them touched.
template <typename Threads>
void set_line_threads(const std::vector<profile::ObjectRecord>& objects, uint32_t line,
                      const Threads& threads, profile::LineRecord& r) {
  int n = 0;
  uint64_t touched = 0;
  for (const auto& [thread, m] : threads) {
    const auto [read, write] = read_write(m);
    touched |= read | write;
    if (n == profile::kLineThreads) continue;
    r.threads[n] = thread;
    r.read_mask[n] = read;
    r.write_mask[n] = write;
    ++n;
  }
  r.thread_count = uint32_t(threads.size());
  name_line_objects(objects, line, touched, r);
}

}  // namespace whymiss::analysis::est
