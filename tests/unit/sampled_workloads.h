// Synthetic sampled profiles of the tests/workloads programs: each program is an access stream
// per thread (one access per nanosecond, threads interleaved), sampled the way a task-clock
// sampler would (one sample per period of each thread's time, jittered so loops do not alias),
// with windows captured the way a breakpoint stage would (every `window_every` samples, the next
// `window_captures` executions of each of the hottest instructions in every thread). PMU
// profiles also get each sample's data source from a full simulation of the stream.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "model/geometry.h"
#include "model/profile.h"
#include "sim/sim.h"

namespace whymiss::testing {

struct Access {
  uint64_t ip = 0, addr = 0;
  uint16_t size = 8;
  uint8_t flags = profile::kAccessRead;
};

struct Workload {
  uint32_t threads = 1;  // thread indices 1..threads when `main_idle`, else 0..threads-1
  bool main_idle = false;
  uint64_t accesses = 0;  // per thread
  std::function<Access(uint32_t thread, uint64_t i)> gen;
  std::vector<profile::ObjectRecord> objects;
};

struct SamplerConfig {
  profile::Mode mode = profile::Mode::Soft;
  uint64_t period = 2003;        // accesses (= ns) between samples of one thread
  uint32_t window_every = 64;    // samples between windows; 0 = no capture stage
  uint32_t window_captures = 256;
  uint32_t hot_instructions = 4;
  // Int3 (the default, as the golden soft profiles were written): captures serialised by the traps;
  // HwBreakpoint: captures in the threads' real interleaving.
  profile::CaptureBackend backend = profile::CaptureBackend::Int3;
};

inline uint64_t object_of(const Workload& w, uint64_t addr) {
  for (const auto& o : w.objects)
    if (addr >= o.start && addr < o.start + o.size) return o.serial;
  return 0;
}

inline profile::Profile sampled_profile(const Workload& w, const SamplerConfig& c) {
  using namespace profile;
  Profile p;
  p.meta.mode = uint32_t(c.mode);
  p.meta.sample_source = uint32_t(c.mode == Mode::Pmu ? SampleSource::Pebs : SampleSource::TaskClock);
  p.meta.sample_period_ns = c.period;
  p.meta.capture_backend = uint32_t(c.window_every ? c.backend : CaptureBackend::None);
  p.meta.exited = 1;
  p.meta.threads_seen = w.threads + (w.main_idle ? 1 : 0);
  p.command = "synthetic";
  p.geometry = default_geometry();
  p.geometry_source = "default";
  p.counters.resize(p.geometry.levels.size());  // zero until estimate(); the reader wants one per level
  p.objects = w.objects;
  const uint32_t first = w.main_idle ? 1 : 0;
  auto time_of = [&](uint32_t t, uint64_t i) { return i * w.threads + (t - first); };
  // Data sources (pmu): replay the whole stream, threads interleaved access by access.
  std::map<std::pair<uint32_t, uint64_t>, uint8_t> level;
  std::vector<std::pair<uint32_t, uint64_t>> picks;
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  auto rnd = [&]() { seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17; return seed; };
  for (uint32_t t = first; t < first + w.threads; ++t)
    for (uint64_t s = 0;; ++s) {
      uint64_t i = s * c.period + rnd() % c.period;
      if (i >= w.accesses) break;
      picks.push_back({t, i});
    }
  std::sort(picks.begin(), picks.end(), [&](auto a, auto b) { return time_of(a.first, a.second) < time_of(b.first, b.second); });
  if (c.mode == Mode::Pmu) {
    sim::Knobs k;
    k.cores = w.threads;
    k.concurrent = false;
    auto hr = sim::Hierarchy::create(p.geometry, k);
    auto& h = *hr;
    for (const auto& pk : picks) level[pk] = 0;
    for (uint64_t i = 0; i < w.accesses; ++i)
      for (uint32_t t = first; t < first + w.threads; ++t) {
        Access a = w.gen(t, i);
        auto r = h->access(t - first, a.addr, a.size, a.flags & kAccessWrite);
        auto it = level.find({t, i});
        if (it != level.end()) it->second = uint8_t(r.lines[0].levels_reached - 1);
      }
  }
  std::map<uint64_t, uint64_t> hot;
  for (const auto& [t, i] : picks) {
    Access a = w.gen(t, i);
    SampleRecord s{};
    s.time_ns = time_of(t, i);
    s.ip = a.ip;
    s.addr = a.addr;
    s.object = object_of(w, a.addr);
    s.thread = t;
    s.size = a.size;
    s.flags = a.flags;
    s.level = c.mode == Mode::Pmu ? level[{t, i}] : kLevelUnknown;
    s.weight = uint32_t(c.period);
    p.samples.push_back(s);
    hot[a.ip]++;
  }
  p.meta.samples = p.samples.size();
  if (!c.window_every) return p;
  std::vector<std::pair<uint64_t, uint64_t>> by_count;
  for (auto [ip, n] : hot) by_count.push_back({n, ip});
  std::sort(by_count.rbegin(), by_count.rend());
  by_count.resize(std::min<size_t>(by_count.size(), c.hot_instructions));
  const uint64_t every = c.period * c.window_every;
  for (uint64_t start = every / 2; start < w.accesses; start += every) {
    for (auto [n, ip] : by_count) {
      WindowRecord wr{};
      wr.ip = ip;
      wr.start_ns = time_of(first, start);
      const uint32_t index = uint32_t(p.windows.size());
      for (uint32_t t = first; t < first + w.threads; ++t) {
        uint32_t got = 0;
        for (uint64_t i = start; i < w.accesses && got < c.window_captures && i < start + 64 * c.window_captures; ++i) {
          Access a = w.gen(t, i);
          if (a.ip != ip) continue;
          CaptureRecord cr{};
          cr.time_ns = time_of(t, i);
          cr.ip = ip;
          cr.addr = a.addr;
          cr.object = object_of(w, a.addr);
          cr.thread = t;
          cr.window = index;
          cr.size = a.size;
          cr.flags = a.flags;
          p.captures.push_back(cr);
          wr.end_ns = std::max(wr.end_ns, cr.time_ns);
          ++got;
        }
        wr.captures += got;
      }
      p.windows.push_back(wr);
    }
  }
  std::stable_sort(p.captures.begin(), p.captures.end(), [](auto& a, auto& b) { return a.time_ns < b.time_ns; });
  return p;
}

// A soft profile with full-trace windows: samples as sampled_profile (no capture stage), plus
// `epochs` epochs, each a window of `steps` consecutive accesses of every thread (one access
// per step: the synthetic streams have no non-memory instructions), the epochs spread evenly
// over the run. `separate`: each epoch holds one thread only (threads never traced together).
struct TraceConfig {
  uint32_t epochs = 3;
  uint32_t steps = 6000;
  bool separate = false;
};

inline profile::Profile traced_profile(const Workload& w, const TraceConfig& tc) {
  using namespace profile;
  SamplerConfig c;
  c.window_every = 0;
  Profile p = sampled_profile(w, c);
  p.meta.capture_backend = uint32_t(CaptureBackend::Trace);
  const uint32_t first = w.main_idle ? 1 : 0;
  uint32_t epoch = 0;
  for (uint32_t e = 0; e < tc.epochs; ++e) {
    const uint64_t at = (w.accesses - tc.steps) / (tc.epochs + 1) * (e + 1);
    for (uint32_t t = first; t < first + w.threads; ++t) {
      if (tc.separate || t == first) ++epoch;
      TraceRecord r{};
      r.thread = t;
      r.epoch = epoch;
      r.start_ns = at * w.threads + (t - first);
      r.end_ns = (at + tc.steps) * w.threads + (t - first);
      r.steps = tc.steps;
      const uint32_t win = uint32_t(p.traces.size());
      for (uint64_t i = at; i < at + tc.steps && i < w.accesses; ++i) {
        Access a = w.gen(t, i);
        TraceAccessRecord x{};
        x.ip = a.ip;
        x.addr = a.addr;
        x.size = a.size;
        x.flags = a.flags;
        x.object = object_of(w, a.addr);
        x.window = win;
        p.trace_accesses.push_back(x);
        r.accesses++;
      }
      p.traces.push_back(r);
    }
  }
  return p;
}

// ---- the workloads (addresses laid out as glibc and the linker would) ----

inline profile::ObjectRecord heap_object(uint64_t serial, uint64_t start, uint64_t size, uint32_t thread) {
  profile::ObjectRecord o{};
  o.serial = serial;
  o.start = start;
  o.size = size;
  o.alloc_thread = thread;
  o.site = profile::kNoSite;
  return o;
}

// Column walk of a global double m[64][ld]: ld = 1024 (8 KiB rows) or 1032 (fixed).
inline Workload conflict_app(bool fixed) {
  Workload w;
  const uint64_t ld = fixed ? 1032 : 1024, base = 0x404000;
  w.accesses = 24 * 64 * 1024;
  w.gen = [=](uint32_t, uint64_t i) {
    uint64_t r = i % 64, j = (i / 64) % 1024;
    return Access{0x401100, base + (r * ld + j) * 8};
  };
  return w;
}

// 16 heap objects of 256 KiB at the same page offset, read in lockstep over 2 KiB each; fixed:
// object k used from byte k*256.
inline Workload conflict_alloc(bool fixed) {
  Workload w;
  w.accesses = 1000 * 256 * 16;
  std::vector<uint64_t> start;
  for (uint64_t k = 0; k < 16; ++k) {
    uint64_t s = 0x7f0000100010 - k * (260 << 10);
    w.objects.push_back(heap_object(10 + k, s, (256 << 10) + (fixed ? k * 256 : 0), 0));
    start.push_back(s + (fixed ? k * 256 : 0));
  }
  w.gen = [=](uint32_t, uint64_t i) {
    uint64_t k = i % 16, e = (i / 16) % 256;
    return Access{0x401200, start[k] + e * 8};
  };
  return w;
}

// 8 passes of a[i] = a[i]*3 + 1 over 8 MiB (a load and a store); fixed: tiled by 32 KiB.
inline Workload capacity(bool fixed) {
  Workload w;
  const uint64_t n = (8 << 20) / 8, block = 4096, base = 0x7f1000000010;
  w.objects.push_back(heap_object(5, base, 8 << 20, 0));
  w.accesses = 8 * n * 2;
  w.gen = [=](uint32_t, uint64_t i) {
    uint64_t j = i / 2, e = fixed ? (j / (block * 8)) * block + j % block : j % n;
    return Access{i % 2 ? 0x401304u : 0x401300u, base + e * 8, 8,
                  uint8_t(i % 2 ? profile::kAccessWrite : profile::kAccessRead)};
  };
  return w;
}

// Two threads (1 and 2) load and store their own counter: adjacent words of a global line, or
// (fixed) a line each. `rmw_same_word`: both atomically add to one word (true sharing); its
// fixed twin adds to a thread-local stack slot.
inline Workload sharing_global(bool fixed, bool same_word) {
  Workload w;
  w.threads = 2;
  w.main_idle = true;
  w.accesses = 2 * 1000000;
  w.gen = [=](uint32_t t, uint64_t i) {
    if (same_word) {
      uint64_t a = fixed ? 0x7ffd0000f000 - t * 0x100000 : 0x405040;
      return Access{0x401500, a, 8, uint8_t(profile::kAccessRead | profile::kAccessWrite)};
    }
    uint64_t a = 0x405000 + (t - 1) * (fixed ? 64 : 8);
    return Access{i % 2 ? 0x401403u : 0x401400u, a, 8,
                  uint8_t(i % 2 ? profile::kAccessWrite : profile::kAccessRead)};
  };
  return w;
}

// Hoard cache-scratch: threads 1 and 2 each write a 16-byte object they allocated; the two
// objects share a line (fixed: 64-byte aligned objects of their own).
inline Workload false_sharing_alloc(bool fixed) {
  Workload w = sharing_global(false, false);
  const uint64_t a1 = fixed ? 0x555500001000 : 0x555500000ed0, a2 = fixed ? 0x555500001040 : 0x555500000ef0;
  w.objects = {heap_object(101, a1, fixed ? 64 : 16, 1), heap_object(102, a2, fixed ? 64 : 16, 2)};
  w.gen = [=](uint32_t t, uint64_t i) {
    return Access{i % 2 ? 0x401603u : 0x401600u, t == 1 ? a1 : a2, 8,
                  uint8_t(i % 2 ? profile::kAccessWrite : profile::kAccessRead)};
  };
  return w;
}

// Sums a 16 KiB global repeatedly: no problem.
inline Workload control() {
  Workload w;
  w.accesses = 4000 * 2048;
  w.gen = [](uint32_t, uint64_t i) { return Access{0x401700, 0x406000 + (i % 2048) * 8}; };
  return w;
}

}  // namespace whymiss::testing
