// The estimator's path for soft profiles with full-trace windows (estimate.h: "Trace windows").
//
// Each epoch's windows (replay_groups: an epoch that traced one thread joins the next one that
// traced another) are replayed together through one simulator (the profile's geometry, one
// core per thread, LRU): the threads' streams interleaved one access each in turn, as exact
// mode's relay interleaves threads that run at once, whatever their real timing was (the
// overlap actually observed is reported beside, trace_summary). Each epoch is replayed twice in
// a row and only the second pass is counted: a line the window touches first then gets the fate
// it would have if the window's behaviour were the program's steady state (its previous use one
// window earlier), instead of a compulsory miss that says nothing. Everything counted is in
// traced accesses.
// One exception to the steady-state assumption: a sweep whose reuses lie farther apart than a
// window reaches (a pass over an array larger than the window's footprint). When the samples of
// an instruction show it sweeping forward over a span D (est::sample_sweeps, the rule of the
// sampled estimator) and in the window it never comes back to a line it left, the lines its
// window touched first miss, by capacity, at every level smaller than D, whatever the second
// pass found.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "analysis/estimate.h"
#include "analysis/estimate_internal.h"
#include "sim/sim.h"

namespace whymiss::analysis {
namespace {

using namespace profile;
constexpr uint32_t kMaxReplayCores = 64;
constexpr uint64_t kMinTracedAccesses = 1000;
constexpr int kHit = 0, kTS = 4, kFS = 5;
constexpr uint64_t kWsMaxWalkLines = 65536;  // as exact mode's walks: bigger levels by a sample of sets

// L1 misses the replay counted so far (by_kind[level][kind][read/write]).
double replayed_l1_misses(const double (&by_kind)[kLevels][kKinds][2]) {
  double n = 0;
  for (int kd = 1; kd < kKinds; ++kd) n += by_kind[0][kd][0] + by_kind[0][kd][1];
  return n;
}

struct InsTally {
  uint64_t acc[2] = {};
  uint64_t miss[kLevels][kKinds] = {};
  uint64_t set_mask = 0;
  std::vector<uint64_t> objs, addrs;
};

struct ObjTally {
  uint64_t miss[kKinds] = {};
  uint64_t threads = 0, sets = 0;
  uint64_t self_conflicts = 0;  // see ObjectRecord::self_conflicts
};

struct LineTally {
  uint64_t miss[kKinds] = {};
  std::vector<uint64_t> ips;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> masks;  // thread -> read, write granules
};

uint64_t granules(uint64_t addr, uint32_t size, uint32_t line) {
  const uint32_t g = std::max<uint32_t>(1, line / 64);
  const uint64_t off = addr % line;
  const uint64_t end = std::min<uint64_t>(line, off + std::max<uint32_t>(1, size));
  uint64_t m = 0;
  for (uint64_t b = off / g; b * g < end && b < 64; ++b) m |= uint64_t(1) << b;
  return m;
}

// The windows replayed together, in epoch order. Normally one group per epoch: the threads that
// joined it. An epoch that traced only one thread of a multi-threaded program says nothing about
// how the threads interleave: on a busy machine the others often do not run within the epoch at
// all, and then true or false sharing vanishes from every replay. Such an epoch is replayed
// together with the next one that traced one other thread, as if the two had run at once; the
// report states how little they overlapped (trace_summary), so the sharing pattern is reported
// with its evidence instead of silence.
struct ReplayGroups {
  std::vector<std::vector<uint32_t>> groups;  // window indices
  uint64_t paired = 0;                        // epochs replayed with another epoch
};

ReplayGroups replay_groups(const Profile& p) {
  std::map<uint32_t, std::vector<uint32_t>> epochs;  // epoch -> windows
  for (uint32_t w = 0; w < p.traces.size(); ++w) epochs[p.traces[w].epoch].push_back(w);
  auto lone_thread = [&](const std::vector<uint32_t>& ws) {
    for (uint32_t w : ws)
      if (p.traces[w].thread != p.traces[ws.front()].thread) return kNoThread;
    return p.traces[ws.front()].thread;
  };
  ReplayGroups r;
  std::vector<uint32_t> pending;  // a one-thread epoch waiting for a partner
  uint32_t pending_thread = kNoThread;
  for (auto& [e, ws] : epochs) {
    const uint32_t t = lone_thread(ws);
    if (t != kNoThread && !pending.empty() && t != pending_thread) {
      pending.insert(pending.end(), ws.begin(), ws.end());
      r.groups.push_back(std::move(pending));
      r.paired += 2;
      pending.clear();
      pending_thread = kNoThread;
      continue;
    }
    if (!pending.empty()) r.groups.push_back(std::move(pending));
    pending.clear();
    pending_thread = kNoThread;
    if (t != kNoThread) {
      pending = ws;
      pending_thread = t;
    } else {
      r.groups.push_back(ws);
    }
  }
  if (!pending.empty()) r.groups.push_back(std::move(pending));
  return r;
}

// Of the time the windows `ws` were traced, how much had one or more (*any) and two or more
// (*both) of them stepping.
void overlap_of(const Profile& p, const std::vector<uint32_t>& ws, uint64_t* any, uint64_t* both) {
  std::vector<std::pair<uint64_t, int>> ev;
  for (uint32_t w : ws) {
    const TraceRecord* t = &p.traces[w];
    const uint64_t end = t->end_ns > t->start_ns ? t->end_ns : t->start_ns;
    ev.push_back({t->start_ns, +1});
    ev.push_back({end, -1});
  }
  std::sort(ev.begin(), ev.end());
  int open = 0;
  uint64_t prev = ev.empty() ? 0 : ev.front().first;
  for (auto& [at, d] : ev) {
    if (open >= 1) *any += at - prev;
    if (open >= 2) *both += at - prev;
    open += d;
    prev = at;
  }
}

// With the profile's trace times, a group's windows replay by each thread's own progress
// rather than strictly one access each in turn: every thread advances one quantum per access
// (the group's median time between a thread's consecutive accesses: all threads step at the same
// speed, as if they ran at once, so a busy machine's time slices do not show) except across a
// system call, where it advances by as long as the call took. A thread asleep in the kernel (a
// futex wait on a mutex another thread holds) thus falls behind while the others run on, and
// the replay keeps what the program's synchronisation allowed: a round-robin replay would put
// two threads inside one critical section and bounce its line on every access. Without system
// calls, and with windows that opened together, this order is the round-robin order (ties keep it).
bool replays_by_progress(const Profile& p, const std::vector<uint32_t>& ws) {
  return ws.size() >= 2 && !p.trace_times.empty() && p.trace_times.size() == p.trace_accesses.size();
}

// The replay order of one group (indices into p.trace_accesses).
std::vector<uint32_t> replay_order(const Profile& p, const std::vector<uint32_t>& wins,
                                   const std::vector<std::vector<uint32_t>>& per_window) {
  // Sort keys: (progress, position in its window, window in the group, access). With equal
  // progress everywhere this is the round-robin order: every window's i-th access, in window
  // order, before any window's (i+1)-th.
  std::vector<std::tuple<uint64_t, uint32_t, uint32_t, uint32_t>> keyed;
  const bool timed = replays_by_progress(p, wins);
  uint64_t quantum = 1;
  if (timed) {
    std::vector<uint64_t> gaps;  // between consecutive accesses with no system call between
    for (uint32_t w : wins) {
      const auto& v = per_window[w];
      for (size_t i = 1; i < v.size(); ++i)
        if (!(p.trace_accesses[v[i]].marks & kTraceAfterSyscall) && p.trace_times[v[i]] >= p.trace_times[v[i - 1]])
          gaps.push_back(p.trace_times[v[i]] - p.trace_times[v[i - 1]]);
    }
    if (!gaps.empty()) {
      std::nth_element(gaps.begin(), gaps.begin() + ptrdiff_t(gaps.size() / 2), gaps.end());
      quantum = std::max<uint64_t>(1, gaps[gaps.size() / 2]);
    }
  }
  for (uint32_t k = 0; k < wins.size(); ++k) {
    const auto& v = per_window[wins[k]];
    uint64_t at_ns = 0;
    // A thread starts as late as its first access came after its window opened: one asleep in
    // the kernel when the epoch began (waiting for a lock) starts when it woke.
    const uint64_t opened = p.traces[wins[k]].start_ns;
    if (timed && !v.empty() && p.trace_times[v[0]] > opened) at_ns = p.trace_times[v[0]] - opened;
    for (uint32_t i = 0; i < v.size(); ++i) {
      if (timed && i) {
        const uint64_t t0 = p.trace_times[v[i - 1]], t1 = p.trace_times[v[i]];
        const bool blocked = p.trace_accesses[v[i]].marks & kTraceAfterSyscall;
        at_ns += blocked && t1 > t0 ? std::max(quantum, t1 - t0) : quantum;
      }
      keyed.emplace_back(at_ns, i, k, v[i]);
    }
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<uint32_t> order(keyed.size());
  for (size_t n = 0; n < keyed.size(); ++n) order[n] = std::get<3>(keyed[n]);
  return order;
}

// Mutex hand-over shares and the weight of lock-mediated coherence misses (estimate.h). A share
// is (hand-overs + 1) / (acquisitions + 2): never 0 or 1 from a few counts.
struct LockWeight {
  double native = -1, traced = -1, weight = -1;
};
LockWeight lock_weight(const Profile& p) {
  LockWeight w;
  if (p.locks.empty()) return w;
  const LockInfoRecord& r = p.locks[0];
  auto share = [](uint64_t h, uint64_t n) { return (double(h) + 1) / (double(n) + 2); };
  if (r.native_acquisitions) w.native = share(r.native_handovers, r.native_acquisitions);
  if (r.traced_acquisitions) w.traced = share(r.traced_handovers, r.traced_acquisitions);
  if (r.native_acquisitions >= kMinLockAcquisitions && r.traced_acquisitions >= kMinLockAcquisitions &&
      r.traced_handovers > 0)
    w.weight = std::min(1.0, w.native / w.traced);
  return w;
}

// Which of a group's replayed accesses (replay order) are lock-mediated L1 coherence misses: the
// access ran under a mutex (in its lock or unlock call, or while held) and the line's previous
// write by another thread ran under the same mutex. A mutex is known by its lock word's line: an
// access in a lock call is on it (glibc's lock, unlock and wait paths touch only the mutex), and
// a held stretch belongs to the line of its thread's last write in a lock call (with nested
// mutexes, the innermost; a failed trylock of another mutex, or an inner mutex's release,
// re-attributes the rest of the section: such misses are then weighed by the wrong mutex's
// lines, i.e. mostly not at all). Two passes over the order, as the replay makes: the second
// sees the first's last writes, as the simulator's second pass does.
std::vector<bool> lock_mediated(const Profile& p, const std::vector<uint32_t>& order,
                                const std::vector<sim::AccessResult>& res, uint32_t line) {
  std::vector<bool> out(order.size(), false);
  std::unordered_map<uint64_t, std::pair<uint32_t, uint64_t>> last_write;  // line -> (thread, mutex line + 1)
  for (int pass = 0; pass < 2; ++pass) {
    // (Per pass: a window's first critical sections belong to its own first lock call, not to
    // the mutex its thread held at the end of the group.)
    std::unordered_map<uint32_t, uint64_t> mutex_line;  // thread -> its last lock-call write's line + 1
    for (size_t k = 0; k < order.size(); ++k) {
      const TraceAccessRecord& a = p.trace_accesses[order[k]];
      const uint32_t thread = p.traces[a.window].thread;
      const uint64_t ln = a.addr / line;
      const bool write = a.flags & kAccessWrite;
      uint64_t under = 0;  // the mutex's line + 1, 0 for none
      if (a.marks & kTraceInLockCall) {
        under = ln + 1;
        if (write) mutex_line[thread] = ln + 1;
      } else if (a.marks & kTraceLockHeld) {
        if (auto it = mutex_line.find(thread); it != mutex_line.end()) under = it->second;
      }
      if (pass == 1 && under) {
        const sim::LineResult& lr = res[k].lines[0];
        const bool coherence = lr.levels_reached && (lr.level[0] == sim::Outcome::TrueSharing ||
                                                     lr.level[0] == sim::Outcome::FalseSharing);
        if (coherence)
          if (auto it = last_write.find(ln); it != last_write.end())
            out[k] = it->second.first != thread && it->second.second == under;
      }
      if (write) last_write[ln] = {thread, under};
    }
  }
  return out;
}

}  // namespace

bool uses_traces(const Profile& p) {
  return p.meta.mode == uint32_t(Mode::Soft) && p.trace_accesses.size() >= kMinTracedAccesses;
}

TraceSummary trace_summary(const Profile& p) {
  TraceSummary s;
  s.windows = p.traces.size();
  s.accesses = p.trace_accesses.size();
  std::set<uint32_t> epochs, threads;
  for (const TraceRecord& t : p.traces) {
    epochs.insert(t.epoch);
    threads.insert(t.thread);
    s.steps += t.steps;
  }
  s.epochs = epochs.size();
  s.threads = threads.size();
  // Overlap: of the time that groups replayed together were being traced (groups of two or more
  // windows), the share during which two or more threads were stepping at once. Epochs paired
  // because each traced one thread count with their traced time and no overlap.
  const ReplayGroups g = replay_groups(p);
  s.paired_epochs = g.paired;
  std::vector<bool> blocked_in_window(p.traces.size(), false);  // an access after a system call
  for (const TraceAccessRecord& a : p.trace_accesses)
    if ((a.marks & kTraceAfterSyscall) && a.window < p.traces.size()) blocked_in_window[a.window] = true;
  uint64_t any = 0, both = 0;
  for (const auto& ws : g.groups) {
    if (ws.size() < 2) continue;
    overlap_of(p, ws, &any, &both);
    s.together_groups++;
    if (replays_by_progress(p, ws))
      for (uint32_t w : ws)
        if (blocked_in_window[w]) {
          s.timed_groups++;
          break;
        }
  }
  s.overlap = any ? double(both) / double(any) : -1;
  if (!p.locks.empty()) {
    const LockInfoRecord& r = p.locks[0];
    s.native_acquisitions = r.native_acquisitions, s.native_handovers = r.native_handovers;
    s.traced_acquisitions = r.traced_acquisitions, s.traced_handovers = r.traced_handovers;
    s.untracked_acquisitions = r.untracked;
  }
  const LockWeight lw = lock_weight(p);
  s.native_handover_share = lw.native;
  s.traced_handover_share = lw.traced;
  s.lock_weight = lw.weight;
  return s;
}

Status estimate_from_traces(Profile& p, const EstimateKnobs&) {
  if (auto st = validate(p.geometry); !st) return st;
  const size_t nl = p.geometry.levels.size();
  const uint32_t line = p.geometry.line();
  const uint64_t l1_sets = p.geometry.levels[0].sets();
  // Accesses per window, in program order (the export groups them; any order of windows).
  std::vector<std::vector<uint32_t>> per_window(p.traces.size());
  for (uint32_t i = 0; i < p.trace_accesses.size(); ++i) {
    const uint32_t w = p.trace_accesses[i].window;
    if (w >= p.traces.size())
      return make_error("a traced access names window " + std::to_string(w) + " but the profile has " +
                        std::to_string(p.traces.size()));
    per_window[w].push_back(i);
  }
  const ReplayGroups groups = replay_groups(p);
  std::map<uint32_t, uint32_t> core;  // thread -> simulated core
  for (uint32_t w = 0; w < p.traces.size(); ++w)
    core.emplace(p.traces[w].thread, uint32_t(core.size() % kMaxReplayCores));
  sim::Knobs kn;
  kn.cores = std::max<uint32_t>(1, std::min<uint32_t>(uint32_t(core.size()), kMaxReplayCores));
  kn.concurrent = false;
  auto h = sim::Hierarchy::create(p.geometry, kn);
  if (!h) return Error{h.error()};

  std::map<uint64_t, InsTally> ins;
  std::unordered_map<uint64_t, ObjTally> objs;
  std::map<uint64_t, LineTally> coh_lines;
  std::unordered_map<uint64_t, std::map<uint32_t, std::pair<uint64_t, uint64_t>>> masks;  // line -> thread
  double by_kind[kLevels][kKinds][2] = {};

  // Sweep spans of the instructions whose samples step forward more than back.
  std::unordered_map<uint64_t, uint64_t> span;
  for (auto& [ip, sw] : est::sample_sweeps(p))
    if (sw.sweeps()) span[ip] = sw.span;
  // Levels whose size a sweep of `d` bytes exceeds (sizes grow with the level).
  auto beyond = [&](uint64_t d) {
    size_t n = 0;
    while (n < nl && p.geometry.levels[n].size < d) ++n;
    return n;
  };

  uint32_t ordinal = 0;
  std::unordered_map<uint64_t, const ObjectRecord*> object_of;  // serial -> record
  for (const ObjectRecord& o : p.objects) object_of[o.serial] = &o;
  const uint32_t l1_ways = p.geometry.levels[0].ways;
  // How each instruction's L1 misses step through memory (StepRecord; no pointer check: the
  // trace holds addresses, not values). State per (instruction, thread), within a replay group.
  struct StepState {
    uint64_t last_line = 0;
    int64_t last_delta = 0;
  };
  std::map<uint64_t, StepRecord> steps;
  // The `sets` view's numbers, estimated from the replay: per (level, set) accesses by outcome,
  // and per instruction the re-conflict distances of its L1 misses (per thread, within a replay group:
  // a distance that would span windows is not seen).
  std::map<std::pair<uint32_t, uint32_t>, SetCountRecord> set_counts;
  std::map<uint64_t, RcdRecord> rcd;
  // Working-set samples (one per replay group), from the first traced window's start.
  std::vector<WorkingSetRecord> ws;
  std::unordered_map<uint32_t, const ObjectRecord*> example_of_site;  // for the view's type lookup
  for (const ObjectRecord& o : p.objects) example_of_site.emplace(o.site, &o);
  uint32_t ws_samples = 0;
  uint64_t first_start = UINT64_MAX;
  for (const TraceRecord& t : p.traces) first_start = std::min(first_start, t.start_ns);
  const uint64_t rcd_sets = std::min<uint64_t>(l1_sets, kMaxSetRecords);
  // Lock-mediated coherence misses count with this weight: a running credit per instruction
  // (from one half: counts round to nearest), a miss counting when it reaches one, else counting
  // as the hit it would have been without the hand-over.
  const double lweight = lock_weight(p).weight;
  std::unordered_map<uint64_t, double> lcredit;
  for (const auto& wins : groups.groups) {
    std::map<uint32_t, std::pair<uint64_t, std::unordered_map<uint64_t, uint64_t>>> rcd_state;
    std::map<std::pair<uint64_t, uint32_t>, StepState> step_state;
    // One access of each window in turn, or by the threads' progress (replay_order).
    const std::vector<uint32_t> order = replay_order(p, wins, per_window);
    // Each epoch's addresses get their own tag above the user address space, so that epochs
    // never share lines; with LRU, older epochs' lines leave first and never change this one's.
    const uint64_t tag = uint64_t(++ordinal % 0xFFFF + 1) << 47;
    std::vector<bool> first(order.size(), false);  // the line's first access on its core here
    std::map<uint32_t, std::set<uint64_t>> seen;
    std::vector<sim::AccessResult> res(order.size());
    std::vector<bool> self(order.size(), false);  // an L1 conflict its own object's lines made
    // Instructions that come back in the window to a line they left for another: not a plain
    // sweep, whatever their samples' span (a blocked loop sweeps the whole matrix over time but
    // reuses each line within its block).
    struct Walk {
      uint64_t last = UINT64_MAX;
      std::set<uint64_t> lines;
      bool returns = false;
    };
    std::map<std::pair<uint64_t, uint32_t>, Walk> walks;  // (instruction, thread)
    for (int pass = 0; pass < 2; ++pass)
      for (size_t k = 0; k < order.size(); ++k) {
        const TraceAccessRecord& a = p.trace_accesses[order[k]];
        const uint32_t thread = p.traces[a.window].thread;
        res[k] = (*h)->access(core[thread], (a.addr & ((uint64_t(1) << 47) - 1)) | tag,
                              std::clamp<uint32_t>(a.size, 1, 4096), a.flags & kAccessWrite);
        if (pass == 1) {
          const sim::LineResult& lr = res[k].lines[0];
          auto it = a.object ? object_of.find(a.object) : object_of.end();
          if (it != object_of.end() && it->second->size && lr.levels_reached &&
              lr.level[0] == sim::Outcome::Conflict) {
            const uint64_t mask = (uint64_t(1) << 47) - 1;
            const uint64_t lo = ((it->second->start & mask) | tag) / line;
            const uint64_t hi = (((it->second->start + it->second->size - 1) & mask) | tag) / line + 1;
            self[k] = (*h)->rivals_within(core[thread], lr.line, lo, hi, l1_ways) >= l1_ways;
          }
          continue;
        }
        first[k] = seen[core[thread]].insert(a.addr / line).second;
        if (span.count(a.ip)) {
          Walk& w = walks[{a.ip, thread}];
          if (a.addr / line != w.last && !w.lines.insert(a.addr / line).second) w.returns = true;
          w.last = a.addr / line;
        }
      }
    // Levels at which an instruction's reuses within the window met conflicts. A line the window
    // touched first was last used before it, at least a window's footprint earlier: the second
    // pass puts it exactly there. A miss there by capacity holds for any longer distance too, but
    // a conflict may be an artefact of cutting the program's pattern at the window's edges (a
    // padded column walk cut after a few column groups overfills some sets). It stands only when
    // the instruction's reuses inside the window conflict as well; otherwise it is a capacity miss.
    std::set<std::pair<uint64_t, size_t>> conflicts_inside;
    for (size_t k = 0; k < order.size(); ++k) {
      if (first[k]) continue;
      const sim::LineResult& lr = res[k].lines[0];
      for (size_t l = 0; l < nl && l < lr.levels_reached; ++l)
        if (lr.level[l] == sim::Outcome::Conflict) conflicts_inside.insert({p.trace_accesses[order[k]].ip, l});
    }
    const std::vector<bool> thin =
        lweight >= 0 && lweight < 1 ? lock_mediated(p, order, res, line) : std::vector<bool>(order.size(), false);
    for (size_t k = 0; k < order.size(); ++k) {
      const TraceAccessRecord& a = p.trace_accesses[order[k]];
      const uint32_t thread = p.traces[a.window].thread;
      const bool write = a.flags & kAccessWrite;
      const uint32_t size = std::clamp<uint32_t>(a.size, 1, 4096);
      sim::AccessResult& r = res[k];
      if (thin[k]) {
        double& credit = lcredit.try_emplace(a.ip, 0.5).first->second;
        credit += lweight;
        if (credit >= 1) {
          credit -= 1;
        } else {
          r.lines[0].level[0] = sim::Outcome::Hit;
          r.lines[0].levels_reached = 1;
        }
      }
      if (first[k]) {
        sim::LineResult& lr = r.lines[0];
        for (size_t l = 0; l < nl && l < lr.levels_reached; ++l)
          if (lr.level[l] == sim::Outcome::Conflict && !conflicts_inside.count({a.ip, l}))
            lr.level[l] = sim::Outcome::Capacity;
        if (auto it = span.find(a.ip); it != span.end() && !walks[{a.ip, thread}].returns) {
          // The sweep's reuse distance decides, not the window's wrap-around.
          const size_t n = beyond(it->second);
          for (size_t l = 0; l < n; ++l)
            if (l >= lr.levels_reached || lr.level[l] == sim::Outcome::Hit) lr.level[l] = sim::Outcome::Capacity;
          if (n > 0 && lr.levels_reached < n + 1) {
            if (n < nl) lr.level[n] = sim::Outcome::Hit;
            lr.levels_reached = uint8_t(std::min(n, nl) + 1);
          }
        }
      }
      {
        InsTally& x = ins[a.ip];
        x.acc[write]++;
        auto& m = masks[a.addr / line][thread];
        (write ? m.second : m.first) |= granules(a.addr, size, line);
        for (uint8_t j = 0; j < r.nlines; ++j) {
          const sim::LineResult& lr = r.lines[j];
          const uint64_t addr = j == 0 ? a.addr : (a.addr / line + 1) * line;
          for (size_t l = 0; l < nl && l < lr.levels_reached; ++l) {
            const int kd = int(lr.level[l]);
            by_kind[l][kd][write] += 1;
            const uint64_t sets = p.geometry.levels[l].sets();
            const uint32_t set = uint32_t((addr / line) % sets % kMaxSetRecords);
            SetCountRecord& sc = set_counts[{uint32_t(l), set}];
            sc.level = uint32_t(l);
            sc.set = set;
            sc.by_kind[kd]++;
            if (kd != kHit) x.miss[l][kd]++;
          }
          const int k1 = lr.levels_reached ? int(lr.level[0]) : kHit;
          if (k1 != kHit) {  // its re-conflict distance (profile::RcdRecord)
            auto& [count, last] = rcd_state[thread];
            RcdRecord& rr = rcd[a.ip];
            rr.ip = a.ip;
            rr.source = kRcdEstimated;
            rr.l1_sets = uint32_t(rcd_sets);
            uint64_t& prev = last[(addr / line) % l1_sets % rcd_sets];
            ++count;
            if (prev) rr.buckets[rcd_bucket(count - prev - 1)]++;
            else rr.first++;
            prev = count;
          }
          if (k1 != kHit && j == 0) {
            StepState& ss = step_state[{a.ip, thread}];
            const uint64_t ln = a.addr / line;
            if (ss.last_line != 0) {
              StepRecord& st = steps[a.ip];
              st.ip = a.ip;
              const int64_t d = int64_t(ln - ss.last_line);
              if (d >= -2 && d <= 2) {
                st.steps[kStepNext]++;
              } else if (d - ss.last_delta >= -1 && d - ss.last_delta <= 1) {
                st.steps[kStepStride]++;
                st.stride = d * int64_t(line);
              } else {
                st.steps[kStepIrregular]++;
              }
              ss.last_delta = d;
            }
            ss.last_line = ln;
          }
          if (k1 == kHit || k1 == 1) continue;  // hits, and compulsory misses (none after pass 1)
          // A non-compulsory L1 miss: where it landed.
          x.set_mask |= uint64_t(1) << ((addr / line) % l1_sets % 64);
          if (a.object) {
            if (std::find(x.objs.begin(), x.objs.end(), a.object) == x.objs.end()) x.objs.push_back(a.object);
            ObjTally& o = objs[a.object];
            o.miss[k1]++;
            o.threads |= uint64_t(1) << (thread % 64);
            o.sets |= uint64_t(1) << ((addr / line) % l1_sets % 64);
            if (k1 == int(sim::Outcome::Conflict) && j == 0 && self[k]) o.self_conflicts++;
          }
          if (x.addrs.size() < size_t(kRefs) &&
              std::none_of(x.addrs.begin(), x.addrs.end(), [&](uint64_t b) { return b / line == addr / line; }))
            x.addrs.push_back(addr);
          if (k1 == kTS || k1 == kFS) {
            LineTally& lt = coh_lines[addr / line];
            lt.miss[k1]++;
            if (lt.ips.size() < size_t(kRefs) && std::find(lt.ips.begin(), lt.ips.end(), a.ip) == lt.ips.end())
              lt.ips.push_back(a.ip);
          }
        }
      }
    }
    // The `working-set` view's estimate: what this group's replay left in the simulated caches,
    // its own lines only (this group's tag), per level and allocation site.
    {
      std::unordered_map<uint64_t, uint64_t> object_at;  // tagged line -> object serial
      uint64_t start = UINT64_MAX;
      for (uint32_t w : wins) start = std::min(start, p.traces[w].start_ns);
      for (uint32_t i : order) {
        const TraceAccessRecord& a = p.trace_accesses[i];
        if (a.object) object_at[((a.addr & ((uint64_t(1) << 47) - 1)) | tag) / line] = a.object;
      }
      struct SetWalk {
        const std::unordered_map<uint64_t, uint64_t>* object_at;
        const std::unordered_map<uint64_t, const ObjectRecord*>* object_of;
        uint64_t tag;  // this group's address tag (bits 47 and up)
        uint32_t line;
        std::map<std::pair<uint32_t, uint32_t>, uint64_t> lines;  // (level, site) -> lines
      } wk{&object_at, &object_of, tag >> 47, line, {}};
      (*h)->for_each_line(
          [](size_t level, uint32_t, uint64_t ln, void* arg) {
            auto* w = static_cast<SetWalk*>(arg);
            if ((ln * w->line) >> 47 != w->tag) return;  // another group's line
            uint32_t site = kWsNotHeap;
            if (auto it = w->object_at->find(ln); it != w->object_at->end())
              if (auto o = w->object_of->find(it->second); o != w->object_of->end()) site = o->second->site;
            w->lines[{uint32_t(level), site}]++;
          },
          &wk, kWsMaxWalkLines);
      for (auto& [key, n] : wk.lines) {
        WorkingSetRecord r{};
        r.sample = uint32_t(ws_samples);
        r.level = key.first;
        r.site = key.second;
        r.time_ns = start - first_start;
        r.l1_misses = uint64_t(replayed_l1_misses(by_kind));
        r.lines = n * sim::Hierarchy::walk_step(p.geometry.levels[key.first], kWsMaxWalkLines);
        if (auto it = example_of_site.find(key.second); it != example_of_site.end())
          r.example_serial = it->second->serial, r.example_start = it->second->start, r.example_size = it->second->size;
        ws.push_back(r);
      }
      ++ws_samples;
    }
  }

  // Records, as exact mode writes them (in traced accesses).
  p.working_set = std::move(ws);
  p.working_set_info.assign(1, WorkingSetInfoRecord{});
  p.working_set_info[0].samples = ws_samples;
  for (size_t l = 0; l < nl && l < size_t(kLevels); ++l)
    p.working_set_info[0].set_step[l] = uint32_t(sim::Hierarchy::walk_step(p.geometry.levels[l], kWsMaxWalkLines));
  p.steps.clear();
  for (auto& [ip, st] : steps) p.steps.push_back(st);
  p.set_counts.clear();
  for (auto& [key, sc] : set_counts) p.set_counts.push_back(sc);
  p.rcd.clear();
  for (auto& [ip, rr] : rcd) p.rcd.push_back(rr);
  p.instructions.clear();
  p.lines.clear();
  p.counters.assign(nl, CounterRecord{});
  for (size_t l = 0; l < nl; ++l)
    for (int kd = 0; kd < kKinds; ++kd)
      for (int rw = 0; rw < 2; ++rw) p.counters[l].by_kind[kd][rw] = uint64_t(by_kind[l][kd][rw]);
  for (auto& [ip, x] : ins) {
    InstructionRecord r{};
    r.ip = ip;
    r.accesses[0] = x.acc[0];
    r.accesses[1] = x.acc[1];
    for (size_t l = 0; l < nl; ++l)
      for (int kd = 1; kd < kKinds; ++kd) r.misses[l][kd] = x.miss[l][kd];
    r.l1_set_mask = x.set_mask;
    for (size_t j = 0; j < x.objs.size() && j < size_t(kRefs); ++j) r.objects[j] = x.objs[j];
    r.object_count = uint32_t(x.objs.size());
    for (size_t j = 0; j < x.addrs.size(); ++j) r.sample_addrs[j] = x.addrs[j];
    p.instructions.push_back(r);
  }
  for (auto& [l, t] : coh_lines) {
    LineRecord r{};
    r.line = l;
    for (int kd = 0; kd < kKinds; ++kd) r.misses[kd] = t.miss[kd];
    for (auto& th : r.threads) th = kNoThread;
    for (size_t j = 0; j < t.ips.size(); ++j) r.ips[j] = t.ips[j];
    est::set_line_threads(p.objects, line, masks[l], r);
    p.lines.push_back(r);
  }
  for (ObjectRecord& o : p.objects) {
    std::fill(std::begin(o.misses), std::end(o.misses), 0);
    o.thread_mask = o.l1_set_mask = 0;
    o.self_conflicts = 0;
    auto it = objs.find(o.serial);
    if (it == objs.end()) continue;
    for (int kd = 0; kd < kKinds; ++kd) o.misses[kd] = it->second.miss[kd];
    o.thread_mask = it->second.threads;
    o.l1_set_mask = it->second.sets;
    o.self_conflicts = uint32_t(std::min<uint64_t>(it->second.self_conflicts, UINT32_MAX));
  }
  return Ok{};
}

}  // namespace whymiss::analysis
