// The estimator: sampled facts → the records analyze() reads. The model is described in
// estimate.h; this file follows it step by step (gather, sharing lines, reuse evidence, window
// replay, sample replay of shared lines, per-instruction model, records).
#include "analysis/estimate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "analysis/estimate_internal.h"
#include "sim/sim.h"

namespace whymiss::analysis {
namespace {

using namespace profile;
using est::Ins;
using est::LineUse;
constexpr uint32_t kMaxReplayCores = 64;  // more threads fold onto these cores
constexpr int kHit = 0, kComp = 1, kCap = 2, kConf = 3, kTS = 4, kFS = 5;

struct Estimator {
  Profile& p;
  const EstimateKnobs& k;
  size_t nl = 0;
  uint32_t line = 64;
  std::map<uint64_t, Ins> ins;               // by ip
  std::unordered_map<uint64_t, LineUse> lines;  // by line address
  std::unordered_map<uint64_t, const ObjectRecord*> objects;
  // Coherence misses found per line and instruction: [line][ip] -> [kind TS/FS] (sample units).
  std::map<uint64_t, std::map<uint64_t, double[2]>> line_coh;

  Estimator(Profile& prof, const EstimateKnobs& knobs) : p(prof), k(knobs) {}

  bool pmu() const { return p.meta.mode == uint32_t(Mode::Pmu); }
  // Lines whose coherence misses come from their samples (not from replayed captures).
  // A shared line's coherence misses come from the samples (else from the window replay) in pmu
  // mode, where fewer than two threads' captures of it overlap (gather), and with int3
  // captures: every thread traps on the one patched instruction and the stepping protocol
  // serialises them there, so the captured order is the traps', not the program's interleaving.
  bool by_samples(const LineUse& u) const {
    return u.shared && (pmu() || int3() || u.capture_threads.size() < 2);
  }
  bool int3() const { return p.meta.capture_backend == uint32_t(CaptureBackend::Int3); }
  Ins& instr(uint64_t ip) {
    Ins& x = ins[ip];
    x.ip = ip;
    x.line = line;
    x.l1_sets = p.geometry.levels[0].sets();
    return x;
  }
  uint64_t line_of(uint64_t a) const { return a / line; }

  Status validate() {
    if (auto st = whymiss::validate(p.geometry); !st) return st;
    nl = p.geometry.levels.size();
    line = p.geometry.line();
    std::unordered_map<uint32_t, uint64_t> last;
    for (const CaptureRecord& c : p.captures) {
      if (c.window >= p.windows.size())
        return make_error("a capture names window " + std::to_string(c.window) + " but the profile has " +
                          std::to_string(p.windows.size()) + " windows");
      auto [it, fresh] = last.emplace(c.thread, c.time_ns);
      if (!fresh && c.time_ns < it->second)
        return make_error("the captures of thread " + std::to_string(c.thread) + " are out of time order");
      it->second = c.time_ns;
    }
    if (pmu())
      for (const SampleRecord& s : p.samples)
        if (s.level != kLevelUnknown && s.level > nl)
          return make_error("a sample's data source level " + std::to_string(s.level) +
                            " is beyond the profile's " + std::to_string(nl) + " cache levels");
    return Ok{};
  }

  void gather() {
    for (const ObjectRecord& o : p.objects) objects[o.serial] = &o;
    for (uint32_t i = 0; i < p.samples.size(); ++i) {
      const SampleRecord& s = p.samples[i];
      Ins& x = instr(s.ip);
      (s.flags & kAccessWrite ? x.writes : x.reads)++;
      x.samples.push_back(i);
      lines[line_of(s.addr)].add(s.thread, s.addr % line, s.size, s.flags, line, s.ip, false);
    }
    // A line's captures show how its threads interleave only where two threads' captures of it
    // overlap in time within one window; one thread captured first and the other after (a busy
    // machine, traps serialising the threads) shows nothing either way. Only threads overlapping
    // another count as captured on the line (by_samples: else the samples decide).
    std::map<std::tuple<uint64_t, uint32_t, uint32_t>, std::pair<uint64_t, uint64_t>> span;
    for (const CaptureRecord& c : p.captures) {
      instr(c.ip);
      lines[line_of(c.addr)].add(c.thread, c.addr % line, c.size, c.flags, line, c.ip, true);
      auto [it, fresh] = span.try_emplace({line_of(c.addr), c.window, c.thread}, c.time_ns, c.time_ns);
      if (!fresh) it->second = {std::min(it->second.first, c.time_ns), std::max(it->second.second, c.time_ns)};
    }
    for (auto& [l, u] : lines) u.capture_threads.clear();
    for (auto a = span.begin(); a != span.end(); ++a)
      for (auto b = std::next(a); b != span.end() && std::get<0>(b->first) == std::get<0>(a->first) &&
                                  std::get<1>(b->first) == std::get<1>(a->first);
           ++b)
        if (a->second.first <= b->second.second && b->second.first <= a->second.second) {
          LineUse& u = lines[std::get<0>(a->first)];
          u.capture_threads.insert(std::get<2>(a->first));
          u.capture_threads.insert(std::get<2>(b->first));
        }
    for (auto& [l, u] : lines) u.shared = u.threads.size() >= k.min_threads_for_sharing && u.written;
  }

  // Reuse evidence: sweep direction and the largest span a sweep covered before coming back.
  void reuse_evidence() {
    for (auto& [ip, sw] : est::sample_sweeps(p)) {
      Ins& x = ins[ip];
      x.sample_fwd = sw.fwd;
      x.sample_back = sw.back;
      x.span = sw.span;
    }
    // Direction within windows: consecutive captures of one instruction, thread and object.
    std::map<std::tuple<uint64_t, uint32_t, uint64_t, uint32_t>, uint64_t> prev;
    for (const CaptureRecord& c : p.captures) {
      auto key = std::make_tuple(c.ip, c.thread, c.object, c.window);
      auto it = prev.find(key);
      if (it != prev.end()) {
        if (c.addr > it->second) ins[c.ip].cap_fwd++;
        if (c.addr < it->second) ins[c.ip].cap_back++;
      }
      prev[key] = c.addr;
    }
  }

  static sim::Knobs replay_knobs(uint32_t cores) {
    sim::Knobs kn;
    kn.cores = std::max<uint32_t>(1, cores);
    kn.concurrent = false;
    return kn;
  }

  // True sharing when thread t's bytes on the line overlap bytes another thread wrote, or t
  // wrote bytes another thread used.
  int sharing_kind(const LineUse& u, uint32_t t) const {
    auto me = u.threads.find(t);
    if (me == u.threads.end()) return kFS;
    uint64_t mine = me->second.read | me->second.write;
    for (const auto& [o, m] : u.threads) {
      if (o == t) continue;
      if ((m.write & mine) || (me->second.write & (m.read | m.write))) return kTS;
    }
    return kFS;
  }

  // Window replay: clusters of windows overlapping in time, each through a fresh simulator.
  Status replay_windows() {
    if (p.captures.empty()) return Ok{};
    std::vector<uint32_t> order(p.windows.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return p.windows[a].start_ns < p.windows[b].start_ns; });
    std::vector<uint32_t> cluster(p.windows.size());
    uint32_t nclusters = 0;
    uint64_t end = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      const WindowRecord& w = p.windows[order[i]];
      if (i == 0 || w.start_ns > end) ++nclusters, end = 0;
      cluster[order[i]] = nclusters - 1;
      end = std::max(end, w.end_ns);
    }
    std::vector<std::vector<const CaptureRecord*>> by_cluster(nclusters);
    for (const CaptureRecord& c : p.captures) by_cluster[cluster[c.window]].push_back(&c);
    // One simulator for all clusters: each cluster's addresses get their own tag above the user
    // address space (a multiple of every set period, so sets are unchanged). With LRU, lines of
    // earlier clusters are always older than the current cluster's, so they never change its
    // outcomes: the same as a fresh simulator per cluster, without allocating one each time.
    std::map<uint32_t, uint32_t> core;
    for (const CaptureRecord& c : p.captures) core.emplace(c.thread, uint32_t(core.size() % kMaxReplayCores));
    auto h = sim::Hierarchy::create(p.geometry, replay_knobs(std::min<uint32_t>(uint32_t(core.size()), kMaxReplayCores)));
    if (!h) return Error{h.error()};
    for (uint32_t ci = 0; ci < nclusters; ++ci) {
      auto& caps = by_cluster[ci];
      std::stable_sort(caps.begin(), caps.end(), [](auto* a, auto* b) { return a->time_ns < b->time_ns; });
      const uint64_t tag = uint64_t(ci % 0xFFFF + 1) << 47;
      for (const CaptureRecord* c : caps) {
        sim::AccessResult r = (*h)->access(core[c->thread], (c->addr & ((uint64_t(1) << 47) - 1)) | tag,
                                           std::clamp<uint32_t>(c->size, 1, 4096), c->flags & kAccessWrite);
        tally_capture(*c, r.lines[0]);
      }
    }
    return Ok{};
  }

  void tally_capture(const CaptureRecord& c, const sim::LineResult& r) {
    Ins& x = ins[c.ip];
    x.captures++;
    const LineUse& u = lines[line_of(c.addr)];
    if (r.levels_reached == 0) return;
    if (r.level[0] == sim::Outcome::Compulsory) {
      x.first_touch++;
      x.first_touch_objs.push_back(c.object);
      x.first_touch_addrs.push_back(c.addr);
      return;
    }
    bool missed = false;
    for (size_t l = 0; l < nl && l < r.levels_reached; ++l) {
      int kd = int(r.level[l]);
      if (kd == kHit || kd == kComp) continue;
      if (kd == kTS || kd == kFS) kd = sharing_kind(u, c.thread);
      x.rep[l][kd] += 1;
      if (l == 0) missed = true;
      if (l == 0 && (kd == kTS || kd == kFS)) x.rep_line_coh[line_of(c.addr)][kd - kTS] += 1;
    }
    if (missed) x.note_miss(c.object, c.addr);
  }

  // Shared lines without cross-thread captures: their samples decide their coherence misses.
  Status replay_shared_samples() {
    std::vector<uint32_t> idx;
    for (uint32_t i = 0; i < p.samples.size(); ++i) {
      const LineUse& u = lines[line_of(p.samples[i].addr)];
      if (by_samples(u)) idx.push_back(i);
    }
    if (idx.empty()) return Ok{};
    std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return p.samples[a].time_ns < p.samples[b].time_ns; });
    std::map<uint32_t, uint32_t> core;
    for (uint32_t i : idx) core.emplace(p.samples[i].thread, uint32_t(core.size() % kMaxReplayCores));
    std::unique_ptr<sim::Hierarchy> h;
    if (!pmu()) {
      auto hr = sim::Hierarchy::create(p.geometry, replay_knobs(std::min<uint32_t>(uint32_t(core.size()), kMaxReplayCores)));
      if (!hr) return Error{hr.error()};
      h = std::move(*hr);
    }
    for (uint32_t i : idx) {
      const SampleRecord& s = p.samples[i];
      Ins& x = ins[s.ip];
      const LineUse& u = lines[line_of(s.addr)];
      int kd = sharing_kind(u, s.thread);
      size_t missed_levels = 0;
      if (pmu()) {
        missed_levels = s.level == kLevelUnknown ? 0 : std::min<size_t>(s.level, nl);
      } else {
        sim::LineResult r = h->access(core[s.thread], s.addr, std::clamp<uint32_t>(s.size, 1, 4096),
                                      s.flags & kAccessWrite).lines[0];
        for (size_t l = 0; l < nl && l < r.levels_reached; ++l)
          if (r.level[l] == sim::Outcome::TrueSharing || r.level[l] == sim::Outcome::FalseSharing)
            missed_levels = l + 1;
      }
      for (size_t l = 0; l < missed_levels; ++l) x.miss[l][kd] += 1;
      // pmu: every sample on the line is decided here; soft: only the coherence misses (the
      // rest go to the per-instruction model like any other sample).
      if (pmu() || missed_levels) x.sample_replayed++;
      if (missed_levels) {
        line_coh[line_of(s.addr)][s.ip][kd - kTS] += 1;
        x.note_miss(s.object, s.addr);
        x.obj_miss[s.object][kd] += 1;
        x.obj_threads[s.object] |= uint64_t(1) << (s.thread % 64);
      }
    }
    return Ok{};
  }

  bool sweeper(const Ins& x) const {
    if (x.cap_fwd + x.cap_back) return x.cap_fwd > x.cap_back;
    return est::Sweep{x.sample_fwd, x.sample_back, x.span}.sweeps();
  }

  // Algorithm 1 on sampled lines at level l: the share of `addrs` in sets holding more distinct
  // lines than ways, when all distinct lines fit in the level (else 0). A set counts as crowded
  // only beyond 1.5 times the lines per set of an even spread of the same lines: sparse samples
  // of a large sweep spread evenly, and when they nearly fill the level about half the sets exceed
  // the ways by chance (Poisson around the mean), while beyond 1.5 times the mean lie only a few
  // percent of sets for any mean near the ways. A real concentration (objects at one set offset)
  // leaves most sets empty, so the even spread is low and the limit stays at the ways.
  double crowded_share(const std::vector<uint64_t>& addrs, size_t l) const {
    const LevelGeometry& g = p.geometry.levels[l];
    std::set<uint64_t> distinct;
    for (uint64_t a : addrs) distinct.insert(line_of(a));
    if (addrs.empty() || distinct.size() * line > g.size) return 0;
    std::map<uint64_t, uint32_t> per_set;
    for (uint64_t d : distinct) per_set[d % g.sets()]++;
    const double even = double(distinct.size()) / double(g.sets());
    const double limit = std::max(double(g.ways), 1.5 * even);
    uint64_t in = 0;
    for (uint64_t a : addrs) in += double(per_set[line_of(a) % g.sets()]) > limit;
    return double(in) / double(addrs.size());
  }

  // The per-instruction model for the samples not decided by the shared-line replay.
  void model(Ins& x) {
    const double base = double(x.samples.size() - x.sample_replayed);
    if (base <= 0) return;
    std::vector<uint64_t> addrs, objs;
    for (uint32_t i : x.samples) addrs.push_back(p.samples[i].addr);
    const bool sweeps = sweeper(x);
    double op_size = 0;
    for (uint32_t i : x.samples) op_size += std::max<uint16_t>(1, p.samples[i].size);
    op_size /= double(std::max<size_t>(1, x.samples.size()));
    if (!pmu()) {
      if (x.samples.size() < k.min_samples_per_instruction) return;
      for (size_t l = 0; l < nl; ++l) {
        const uint64_t size = p.geometry.levels[l].size;
        if (x.captures) {
          for (int kd = kCap; kd < kKinds; ++kd) x.mdl[l][kd] += base * x.rep[l][kd] / double(x.captures);
          if (sweeps && x.span > size) x.mdl[l][kCap] += base * double(x.first_touch) / double(x.captures);
        } else {
          double c = crowded_share(addrs, l);
          if (c >= k.set_concentration) x.mdl[l][kConf] += base * c;
          else if (sweeps && x.span > size) x.mdl[l][kCap] += base * std::min(1.0, op_size / line);
        }
      }
      if (x.captures && sweeps)  // first touches that miss carry objects and sets too
        for (size_t j = 0; j < x.first_touch_objs.size(); ++j)
          if (x.span > p.geometry.levels[0].size) x.note_miss(x.first_touch_objs[j], x.first_touch_addrs[j]);
      if (!x.captures && x.mdl[0][kCap] + x.mdl[0][kConf] > 0)
        for (uint32_t i : x.samples) x.note_miss(p.samples[i].object, p.samples[i].addr);
    } else {
      // Sampled misses per level; kinds from the replay's proportions, else Algorithm 1.
      std::vector<std::vector<uint64_t>> missing(nl);
      for (uint32_t i : x.samples) {
        const SampleRecord& s = p.samples[i];
        if (s.level == kLevelUnknown || by_samples(lines[line_of(s.addr)])) continue;
        for (size_t l = 0; l < std::min<size_t>(s.level, nl); ++l) missing[l].push_back(s.addr);
        if (s.level > 0) x.note_miss(s.object, s.addr);
      }
      for (size_t l = 0; l < nl; ++l) {
        const double m = double(missing[l].size());
        if (m == 0) continue;
        const uint64_t size = p.geometry.levels[l].size;
        double cap = x.rep[l][kCap] + (sweeps && x.span > size ? double(x.first_touch) : 0);
        double conf = x.rep[l][kConf];
        if (cap + conf > 0) {
          x.mdl[l][kCap] += m * cap / (cap + conf);
          x.mdl[l][kConf] += m * conf / (cap + conf);
          continue;
        }
        double c = crowded_share(missing[l], l);
        std::set<uint64_t> distinct;
        for (uint64_t a : missing[l]) distinct.insert(line_of(a));
        const bool big = (sweeps && x.span > size) || distinct.size() * line > size;
        if (c >= k.set_concentration) {
          x.mdl[l][kConf] += m * c;
          x.mdl[l][big ? kCap : kComp] += m * (1 - c);
        } else {
          x.mdl[l][big ? kCap : kComp] += m;
        }
      }
    }
    // Add the model's part and split its L1 misses over the objects the samples fell in.
    double noncomp = 0;
    for (size_t l = 0; l < nl; ++l)
      for (int kd = kComp; kd < kKinds; ++kd) x.miss[l][kd] += x.mdl[l][kd];
    for (int kd = kCap; kd < kKinds; ++kd) noncomp += x.mdl[0][kd];
    std::map<uint64_t, uint64_t> per_obj;
    for (uint32_t i : x.samples) per_obj[p.samples[i].object]++;
    for (auto& [obj, n] : per_obj) {
      double share = double(n) / double(x.samples.size());
      for (int kd = kComp; kd < kKinds; ++kd) x.obj_miss[obj][kd] += x.mdl[0][kd] * share;
      if (noncomp > 0)
        for (uint32_t i : x.samples)
          if (p.samples[i].object == obj) x.obj_threads[obj] |= uint64_t(1) << (p.samples[i].thread % 64);
    }
  }

  // Coherence misses of lines whose captures of >= 2 threads were replayed, in sample units.
  void window_line_coherence() {
    for (auto& [ip, x] : ins) {
      if (pmu() || !x.captures || x.samples.size() < k.min_samples_per_instruction) continue;
      const double base = double(x.samples.size() - x.sample_replayed);
      for (auto& [l, kinds] : x.rep_line_coh) {
        if (by_samples(lines[l])) continue;  // the sample replay counts this line's
        auto& dst = line_coh[l][ip];
        for (int j = 0; j < 2; ++j) dst[j] += base * kinds[j] / double(x.captures);
      }
    }
  }

  void write_records();

  Status run() {
    if (auto st = validate(); !st) return st;
    gather();
    reuse_evidence();
    if (auto st = replay_windows(); !st) return st;
    if (auto st = replay_shared_samples(); !st) return st;
    for (auto& [ip, x] : ins) model(x);
    window_line_coherence();
    write_records();
    return Ok{};
  }
};

uint64_t round_u(double v) { return v <= 0 ? 0 : uint64_t(std::llround(v)); }

void Estimator::write_records() {
  p.instructions.clear();
  p.lines.clear();
  p.counters.assign(nl, CounterRecord{});
  double by_kind[kLevels][kKinds][2] = {};
  for (auto& [ip, x] : ins) {
    if (x.samples.empty()) continue;
    InstructionRecord r{};
    r.ip = ip;
    r.accesses[0] = x.reads;
    r.accesses[1] = x.writes;
    const double wshare = double(x.writes) / double(x.samples.size());
    for (size_t l = 0; l < nl; ++l) {
      for (int kd = kComp; kd < kKinds; ++kd) {
        // A level cannot miss more than the level above it passed on.
        double v = x.miss[l][kd];
        r.misses[l][kd] = round_u(v);
        by_kind[l][kd][0] += v * (1 - wshare);
        by_kind[l][kd][1] += v * wshare;
      }
    }
    r.l1_set_mask = x.set_mask;
    int n = 0;
    for (uint64_t s : x.miss_objs)
      if (n < kRefs) r.objects[n++] = s;
    r.object_count = uint32_t(x.miss_objs.size());
    for (int i = 0; i < kRefs && i < int(x.miss_addrs.size()); ++i) r.sample_addrs[i] = x.miss_addrs[size_t(i)];
    p.instructions.push_back(r);
  }
  // Counters: level 0 sees every sample; level l sees what level l-1 missed. Rounded per kind,
  // hits take the rest, so each level adds up to exactly what it saw.
  uint64_t seen[2] = {0, 0};
  for (auto& [ip, x] : ins) seen[0] += x.reads, seen[1] += x.writes;
  for (size_t l = 0; l < nl; ++l) {
    uint64_t missed[2] = {0, 0};
    for (int kd = kComp; kd < kKinds; ++kd)
      for (int rw = 0; rw < 2; ++rw) {
        uint64_t v = std::min(round_u(by_kind[l][kd][rw]), seen[rw] - missed[rw]);
        p.counters[l].by_kind[kd][rw] = v;
        missed[rw] += v;
      }
    for (int rw = 0; rw < 2; ++rw) {
      p.counters[l].by_kind[kHit][rw] = seen[rw] - missed[rw];
      seen[rw] = missed[rw];
    }
  }
  // Shared lines with coherence misses.
  for (auto& [l, per_ip] : line_coh) {
    LineRecord r{};
    r.line = l;
    for (auto& t : r.threads) t = kNoThread;
    double ts = 0, fs = 0;
    int ni = 0;
    for (auto& [ip, kinds] : per_ip) {
      ts += kinds[0], fs += kinds[1];
      if (kinds[0] + kinds[1] > 0 && ni < kRefs) r.ips[ni++] = ip;
    }
    r.misses[kTS] = round_u(ts);
    r.misses[kFS] = round_u(fs);
    if (r.misses[kTS] + r.misses[kFS] == 0) continue;
    est::set_line_threads(p.objects, line, lines[l].threads, r);
    p.lines.push_back(r);
  }
  // Objects: miss fields from the instructions' per-object shares.
  std::unordered_map<uint64_t, size_t> pos;
  for (size_t i = 0; i < p.objects.size(); ++i) {
    ObjectRecord& o = p.objects[i];
    pos[o.serial] = i;
    std::fill(std::begin(o.misses), std::end(o.misses), 0);
    o.thread_mask = o.l1_set_mask = 0;
  }
  std::unordered_map<uint64_t, std::array<double, kKinds>> acc;
  for (auto& [ip, x] : ins) {
    for (auto& [obj, kinds] : x.obj_miss)
      for (int kd = 0; kd < kKinds; ++kd) acc[obj][size_t(kd)] += kinds[kd];
    for (auto& [obj, mask] : x.obj_threads)
      if (auto it = pos.find(obj); obj && it != pos.end()) p.objects[it->second].thread_mask |= mask;
    for (auto& [obj, sets] : x.obj_sets)
      if (auto it = pos.find(obj); obj && it != pos.end()) p.objects[it->second].l1_set_mask |= sets;
  }
  for (auto& [obj, kinds] : acc)
    if (auto it = pos.find(obj); obj && it != pos.end())
      for (int kd = 0; kd < kKinds; ++kd) p.objects[it->second].misses[kd] = round_u(kinds[size_t(kd)]);
}

}  // namespace

Status estimate(Profile& p, const EstimateKnobs& k) {
  if (p.meta.mode == uint32_t(Mode::Exact)) return Ok{};
  if (uses_traces(p)) return estimate_from_traces(p, k);
  Estimator e(p, k);
  return e.run();
}

}  // namespace whymiss::analysis
