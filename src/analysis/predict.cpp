#include "analysis/predict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_set>

#include "analysis/mrc.h"
#include "sim/sim.h"

namespace whymiss::analysis {
namespace {

using profile::Profile;
constexpr int kThreads = 128;  // the log keeps thread indices mod 128
constexpr int kFalse = int(sim::Outcome::FalseSharing), kTrue = int(sim::Outcome::TrueSharing);
constexpr int kConflict = int(sim::Outcome::Conflict);

struct Counts {
  bool ok = false;
  uint64_t l1 = 0;
  uint64_t kind[sim::kNumOutcomes] = {};
};

// The simulated core of each logged thread index, as the run mapped them.
std::vector<uint32_t> core_map(const Profile& p, uint32_t* ncores) {
  std::vector<uint32_t> core(kThreads);
  for (uint32_t i = 0; i < kThreads; ++i) core[i] = p.meta.cores ? i % p.meta.cores : i;
  for (const auto& t : p.threads)
    if (t.index < kThreads) core[t.index] = t.core;
  uint32_t m = 0;
  for (uint32_t c : core) m = std::max(m, c);
  *ncores = m + 1;
  return core;
}

// Replays `n` log entries (entry(i)) through a fresh hierarchy of geometry `geo`, each address
// passed through remap(entry, addr).
template <class Entry, class Remap>
Counts replay(const Profile& p, const CacheGeometry& geo, size_t n, Entry entry, Remap remap) {
  Counts out;
  uint32_t ncores = 0;
  const std::vector<uint32_t> core = core_map(p, &ncores);
  sim::Knobs k;
  k.cores = ncores;
  k.policy = sim::Policy(p.meta.policy <= 2 ? p.meta.policy : 0);
  k.inclusive_llc = p.meta.inclusive_llc != 0;
  k.concurrent = false;
  auto h = sim::Hierarchy::create(geo, k);
  if (!h) return out;
  sim::AccessResult r;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t e = entry(i);
    const uint64_t a = remap(e, profile::log_addr(e));
    h.value()->access(core[profile::log_thread(e)], a, profile::log_size(e), profile::log_write(e), r);
  }
  const sim::Counters c = h.value()->counters();
  out.ok = true;
  out.l1 = c.level[0].misses();
  for (int o = 0; o < sim::kNumOutcomes; ++o) out.kind[o] = c.level[0].misses_of(sim::Outcome(o));
  return out;
}

template <class Remap>
Counts replay_all(const Profile& p, Remap remap) {
  return replay(p, p.geometry, p.access_log.size(), [&](size_t i) { return p.access_log[i]; }, remap);
}

std::string pct_text(double share) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", share * 100);
  return b;
}

std::string bytes_text(uint64_t n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB"};
  int u = 0;
  double v = double(n);
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  char b[32];
  std::snprintf(b, sizeof b, u ? "%.3g %s" : "%.0f %s", v, units[u]);
  return b;
}

// The finding's kind as a sim outcome index.
int outcome_of(Kind k) {
  switch (k) {
    case Kind::FalseSharing: return kFalse;
    case Kind::TrueSharing: return kTrue;
    case Kind::Conflict: return kConflict;
    case Kind::Capacity: return int(sim::Outcome::Capacity);
  }
  return kConflict;
}

// The lines (line numbers) a sharing finding covers: its first line, and every line recorded
// with the same single heap object (the analysis groups a finding's lines so).
std::unordered_set<uint64_t> sharing_lines(const Profile& p, const Finding& f, uint32_t line) {
  std::unordered_set<uint64_t> out{f.line_addr / line};
  uint64_t serial = 0;
  for (const auto& l : p.lines)
    if (l.line == f.line_addr / line && l.object_count == 1) serial = l.objects[0];
  if (serial)
    for (const auto& l : p.lines)
      if (l.object_count == 1 && l.objects[0] == serial) out.insert(l.line);
  return out;
}

// The row stride of a conflict finding's instructions (their misses' column walk), or 0.
int64_t row_stride(const Profile& p, const Finding& f) {
  uint64_t best = 0;
  int64_t stride = 0;
  for (const auto& ins : f.instructions)
    for (const auto& s : p.steps)
      if (s.ip == ins.ip && s.steps[profile::kStepStride] > best && s.stride != 0) {
        best = s.steps[profile::kStepStride];
        stride = s.stride < 0 ? -s.stride : s.stride;
      }
  return stride;
}

struct Range {
  uint64_t start = 0, end = 0;
  uint64_t shift = 0;   // added to every address in it
  int64_t row = 0;      // > 0: plus one line per `row` bytes from start (padding)
};

// Applies the first range containing addr.
uint64_t remap_ranges(const std::vector<Range>& rs, uint32_t line, uint64_t a) {
  for (const Range& r : rs)
    if (a >= r.start && a < r.end)
      return a + r.shift + (r.row > 0 ? (a - r.start) / uint64_t(r.row) * line : 0);
  return a;
}

// Far enough that a moved object overlaps nothing, and a multiple of every power-of-two set
// period, so the move itself changes no set.
constexpr uint64_t kFar = uint64_t(1) << 40;

void finish_fix(PredictedFix& fx, const Counts& before, const Counts& after, int kind, double scale,
                const std::string& how) {
  fx.available = true;
  fx.replayed = true;
  fx.how = how;
  fx.misses_before = uint64_t(std::llround(double(before.l1) * scale));
  fx.misses_after = uint64_t(std::llround(double(after.l1) * scale));
  fx.kind_before = uint64_t(std::llround(double(before.kind[kind]) * scale));
  fx.kind_after = uint64_t(std::llround(double(after.kind[kind]) * scale));
}

PredictedFix capacity_fix(const Profile& p, const Finding& f) {
  PredictedFix fx;
  std::vector<uint64_t> ips;
  uint64_t accesses = 0;
  for (const auto& ins : f.instructions) ips.push_back(ins.ip);
  std::optional<Mrc> m = instructions_mrc(p, ips);
  if (m) {
    for (const auto& r : p.instructions)
      if (std::find(ips.begin(), ips.end(), r.ip) != ips.end()) accesses += r.accesses[0] + r.accesses[1];
  } else {
    m = program_mrc(p);
    accesses = p.meta.accesses;
  }
  if (!m || m->points.empty() || accesses == 0) {
    fx.why_not = "no miss-ratio curve in the profile";
    return fx;
  }
  const uint64_t level_size = p.geometry.levels[size_t(f.level)].size;
  auto ratio_at = [&](uint64_t size) {  // the curve's point at or just below `size`
    double r = m->points.front().miss_ratio;
    for (const auto& pt : m->points)
      if (pt.size <= size) r = pt.miss_ratio;
    return r;
  };
  const double now = ratio_at(level_size), floor = m->points.back().miss_ratio;
  uint64_t size = 0;
  for (const auto& pt : m->points)
    if (pt.size > level_size && pt.miss_ratio <= floor + 0.1 * (now - floor)) {
      size = pt.size;
      break;
    }
  if (size == 0) {
    fx.why_not = "no cache size on the curve removes them";
    return fx;
  }
  fx.available = true;
  fx.level = f.level;
  fx.cache_size = size;
  fx.what = p.geometry.levels[size_t(f.level)].name + " at " + bytes_text(size) + " (now " +
            bytes_text(level_size) + ") would hold the data: only first touches would miss";
  fx.how = "modelled (miss-ratio curve of a fully-associative LRU cache, " + m->how + ")";
  fx.misses_before = uint64_t(std::llround(now * double(accesses)));
  fx.misses_after = uint64_t(std::llround(ratio_at(size) * double(accesses)));
  fx.kind_before = f.misses;
  fx.kind_after = fx.misses_after < fx.misses_before
                      ? uint64_t(double(f.misses) * double(fx.misses_after) / double(std::max<uint64_t>(1, fx.misses_before)))
                      : f.misses;
  return fx;
}

// ---- latent false sharing ----

struct Candidate {
  const profile::ObjectRecord* o = nullptr;
  std::vector<uint32_t> entries;  // indices into the log
};

// The runs [begin, end) of bytes whose bits have any of `mask`.
std::vector<std::pair<uint64_t, uint64_t>> runs_of(const std::vector<uint8_t>& bits, uint8_t mask) {
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  for (size_t i = 0; i < bits.size();) {
    if (!(bits[i] & mask)) { ++i; continue; }
    size_t j = i;
    while (j < bits.size() && (bits[j] & mask)) ++j;
    runs.push_back({i, j});
    i = j;
  }
  return runs;
}

std::string ranges_text(const std::vector<uint8_t>& bits, uint8_t bit) {
  std::string out;
  int shown = 0;
  for (const auto& [i, j] : runs_of(bits, bit)) {
    if (shown++ == 6) return out + ",...";
    out += (out.empty() ? "" : ",") + std::to_string(i) + "-" + std::to_string(j - 1);
  }
  return out;
}

// A small hierarchy for an object's own accesses: coherence misses come from L1 and the
// invalidations between cores, which the shared level does not change.
CacheGeometry small_geometry(const CacheGeometry& g, uint32_t line) {
  CacheGeometry s;
  LevelGeometry l1 = g.levels.front();
  l1.line = line;
  LevelGeometry l2;
  l2.name = "L2";
  l2.line = line;
  l2.ways = 16;
  l2.size = std::max<uint64_t>(l1.size * 4, 256 * 1024);
  s.levels = {l1, l2};
  s.source = "what-if";
  return s;
}

void latent(const Profile& p, double scale, const PredictKnobs& k, Predictions* out) {
  const uint32_t line = p.geometry.line();
  if (line != 64) return;  // the offsets and the 128-byte unit are defined for 64-byte lines
  // Heap objects, in address order, that more than one thread missed on or used: the log tells.
  std::vector<Candidate> cands;
  for (const auto& o : p.objects)
    if (o.size > 0 && o.size <= (uint64_t(1) << 20)) cands.push_back({&o, {}});
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.o->start < b.o->start; });
  // Overlapping records (an address reused after free) would make one access two objects'.
  std::vector<Candidate> kept;
  for (auto& c : cands)
    if (kept.empty() || kept.back().o->start + kept.back().o->size <= c.o->start) kept.push_back(std::move(c));
  cands.swap(kept);
  if (cands.empty()) return;
  constexpr size_t kMaxEntries = size_t(1) << 22;
  for (size_t i = 0; i < p.access_log.size(); ++i) {
    const uint64_t a = profile::log_addr(p.access_log[i]);
    auto it = std::upper_bound(cands.begin(), cands.end(), a,
                               [](uint64_t x, const Candidate& c) { return x < c.o->start; });
    if (it == cands.begin()) continue;
    --it;
    if (a < it->o->start + it->o->size && it->entries.size() < kMaxEntries) it->entries.push_back(uint32_t(i));
  }
  // Shared and written: at least two threads, one of them writing.
  std::vector<Candidate*> shared;
  for (auto& c : cands) {
    uint64_t seen[2] = {}, wrote[2] = {};
    for (uint32_t i : c.entries) {
      const uint64_t e = p.access_log[i];
      const uint32_t t = profile::log_thread(e);
      seen[t / 64] |= uint64_t(1) << (t % 64);
      if (profile::log_write(e)) wrote[t / 64] |= uint64_t(1) << (t % 64);
    }
    const int threads = __builtin_popcountll(seen[0]) + __builtin_popcountll(seen[1]);
    if (threads >= 2 && (wrote[0] | wrote[1])) shared.push_back(&c);
  }
  std::stable_sort(shared.begin(), shared.end(),
                   [](const Candidate* a, const Candidate* b) { return a->entries.size() > b->entries.size(); });
  if (shared.size() > k.max_objects) shared.resize(k.max_objects);
  for (Candidate* c : shared) {
    auto run = [&](uint32_t line_bytes, uint64_t shift) {
      return replay(p, small_geometry(p.geometry, line_bytes), c->entries.size(),
                    [&](size_t i) { return p.access_log[c->entries[i]]; },
                    [&](uint64_t, uint64_t a) { return a + shift; });
    };
    const Counts today = run(64, 0);
    if (!today.ok) continue;
    auto emit = [&](const Counts& at, const std::string& trigger, uint32_t offset, uint32_t line_bytes) {
      if (!at.ok || at.kind[kFalse] < 2 * today.kind[kFalse] + k.min_misses) return;
      LatentFalseSharing l;
      l.serial = c->o->serial;
      l.start = c->o->start;
      l.size = c->o->size;
      l.site = c->o->site;
      l.alloc_thread = c->o->alloc_thread;
      l.trigger = trigger;
      l.offset = offset;
      l.line = line_bytes;
      l.predicted_misses = uint64_t(std::llround(double(at.kind[kFalse]) * scale));
      l.today_misses = uint64_t(std::llround(double(today.kind[kFalse]) * scale));
      // Which bytes of the object each thread read and wrote.
      std::map<uint32_t, std::vector<uint8_t>> bits;
      const size_t n = std::min<uint64_t>(c->o->size, 1 << 16);
      for (uint32_t i : c->entries) {
        const uint64_t e = p.access_log[i];
        auto& b = bits[profile::log_thread(e)];
        if (b.empty()) b.assign(n, 0);
        const uint64_t off = profile::log_addr(e) - c->o->start;
        for (uint64_t x = off; x < off + profile::log_size(e) && x < n; ++x)
          b[x] |= profile::log_write(e) ? 2 : 1;
      }
      for (const auto& [t, b] : bits) {
        l.threads.push_back(t);
        const std::string w = ranges_text(b, 2), r = ranges_text(b, 1);
        l.bytes.push_back((w.empty() ? "" : "writes " + w) + (w.empty() || r.empty() ? "" : ", ") +
                          (r.empty() ? "" : "reads " + r));
        l.spans.push_back(runs_of(b, 0xff));
      }
      out->latent.push_back(std::move(l));
    };
    for (uint32_t d = 8; d < 64; d += 8) emit(run(64, d), "offset " + std::to_string(d), d, 64);
    // 128-byte lines: today's placement, and moved by one 64-byte line (the other alignment).
    for (uint32_t d : {0u, 64u}) emit(run(128, d), "line 128", d, 128);
  }
}

}  // namespace

uint64_t replay_misses(const Profile& p) {
  if (p.access_log.empty() || p.access_log_info.empty()) return 0;
  const Counts c = replay_all(p, [](uint64_t, uint64_t a) { return a; });
  const double scale = double(p.access_log_info[0].total) / double(p.access_log.size());
  return uint64_t(std::llround(double(c.l1) * scale));
}

Predictions predict(const Profile& p, const std::vector<Finding>& findings, const PredictKnobs& k) {
  Predictions out;
  out.fixes.resize(findings.size());
  out.have_log = !p.access_log.empty() && !p.access_log_info.empty() && !p.geometry.levels.empty();
  const uint32_t line = p.geometry.line();
  // Capacity fixes need no log.
  for (size_t i = 0; i < findings.size(); ++i)
    if (findings[i].kind == Kind::Capacity) out.fixes[i] = capacity_fix(p, findings[i]);
  if (!out.have_log) {
    for (size_t i = 0; i < findings.size(); ++i)
      if (!out.fixes[i].available && out.fixes[i].why_not.empty())
        out.fixes[i].why_not = "the profile has no access log (exact mode, WHYMISS_ACCESS_LOG)";
    return out;
  }
  const auto& info = p.access_log_info[0];
  out.coverage = double(p.access_log.size()) / double(std::max<uint64_t>(1, info.total));
  const double scale = 1 / std::max(out.coverage, 1e-12);
  out.log_how = out.coverage >= 1 ? "replayed (every access)"
                                  : "replayed (the first " + pct_text(out.coverage) +
                                        " % of accesses, counts scaled to the run)";
  Counts before;
  bool have_before = false;
  for (size_t i = 0; i < findings.size() && i < k.max_findings; ++i) {
    const Finding& f = findings[i];
    PredictedFix& fx = out.fixes[i];
    if (f.kind == Kind::Capacity) continue;
    if (f.level != 0) {
      fx.why_not = "only L1 findings are replayed";
      continue;
    }
    if (!have_before) {
      before = replay_all(p, [](uint64_t, uint64_t a) { return a; });
      have_before = true;
    }
    if (!before.ok) {
      fx.why_not = "the simulator could not be created for the replay";
      continue;
    }
    Counts after;
    if (f.kind == Kind::FalseSharing || f.kind == Kind::TrueSharing) {
      const std::unordered_set<uint64_t> lines = sharing_lines(p, f, line);
      after = replay_all(p, [&](uint64_t e, uint64_t a) {
        return lines.count(a / line) ? a + (uint64_t(profile::log_thread(e)) + 1) * kFar : a;
      });
      fx.what = f.kind == Kind::FalseSharing
                    ? "each thread's bytes of the shared line" + std::string(lines.size() > 1 ? "s" : "") +
                          " moved to a line of its own (padding / alignment)"
                    : "each thread works on a private copy (a thread-local sum, combined once at the end)";
    } else {  // conflict
      std::vector<Range> ranges;
      const int64_t stride = row_stride(p, f);
      std::vector<const ObjectRef*> bounded;
      for (const auto& o : f.objects)
        if (o.size) bounded.push_back(&o);
      if (f.origin == Origin::Application && stride > 0 && !bounded.empty()) {
        uint64_t n = 0;
        for (const ObjectRef* o : bounded)
          ranges.push_back({o->start, o->start + o->size, ++n * kFar, stride});
        fx.what = "rows padded by one line (" + std::to_string(stride) + " -> " +
                  std::to_string(stride + line) + " bytes)";
      } else {
        // The objects the allocator placed at one set offset: every heap object from the same
        // allocation sites with conflict misses (a finding lists a few).
        std::set<uint32_t> sites;
        for (const ObjectRef* o : bounded)
          if (o->heap) sites.insert(o->site);
        std::vector<std::pair<uint64_t, uint64_t>> objs;
        for (const auto& o : p.objects)
          if (sites.count(o.site) && o.misses[kConflict] > 0) objs.push_back({o.start, o.size});
        if (objs.empty())
          for (const ObjectRef* o : bounded) objs.push_back({o->start, o->size});
        std::sort(objs.begin(), objs.end());
        if (objs.size() < 2) {
          fx.why_not = "no row stride or second object known to move";
          continue;
        }
        // Many objects from these sites (allocated and freed in turn, say): which of them lived
        // at the same time is not recorded, so staggering them all predicts nothing, and the
        // replay's remap (a scan of the objects per access) would grow with their number.
        constexpr size_t kMaxStaggered = 64;
        if (objs.size() > kMaxStaggered) {
          fx.why_not = std::to_string(objs.size()) + " objects from these allocation sites had conflict misses; "
                       "which of them lived together is not recorded";
          continue;
        }
        const uint64_t sets = p.geometry.levels[0].sets();
        const uint64_t step = std::max<uint64_t>(1, sets / objs.size());
        for (size_t j = 0; j < objs.size(); ++j)
          ranges.push_back({objs[j].first, objs[j].first + objs[j].second, (j + 1) * kFar + j * step * line, 0});
        fx.what = "the " + std::to_string(objs.size()) + " objects' starts staggered by " +
                  std::to_string(step) + " line" + (step > 1 ? "s" : "") + " each (spread over the " +
                  std::to_string(sets) + " sets)";
      }
      after = replay_all(p, [&](uint64_t, uint64_t a) { return remap_ranges(ranges, line, a); });
    }
    if (!after.ok) {
      fx.why_not = "the simulator could not be created for the replay";
      continue;
    }
    finish_fix(fx, before, after, outcome_of(f.kind), scale, out.log_how);
  }
  latent(p, scale, k, &out);
  return out;
}

}  // namespace whymiss::analysis
