#include "analysis/analysis.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

namespace whymiss::analysis {
namespace {

using profile::InstructionRecord;
using profile::LineRecord;
using profile::ObjectRecord;
// Instructions closer than this are taken to be in the same function (for grouping).
constexpr uint64_t kNearCode = 4096;
constexpr int kCompulsory = 1, kCapacity = 2, kConflict = 3, kTrue = 4, kFalse = 5;

uint64_t level_misses(const profile::CounterRecord& c) {
  uint64_t n = 0;
  for (int k = 1; k < profile::kKinds; ++k) n += c.by_kind[k][0] + c.by_kind[k][1];
  return n;
}

uint64_t total_accesses(const profile::CounterRecord& c) {
  uint64_t n = 0;
  for (int k = 0; k < profile::kKinds; ++k) n += c.by_kind[k][0] + c.by_kind[k][1];
  return n;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

Evidence num(std::string key, double v, std::string text = "") {
  Evidence e{std::move(key), text.empty() ? fmt("%.0f", v) : std::move(text), v, true};
  return e;
}
Evidence txt(std::string key, std::string text) { return Evidence{std::move(key), std::move(text), 0, false}; }

std::vector<uint32_t> threads_of(uint64_t mask) {
  std::vector<uint32_t> t;
  for (uint32_t i = 0; i < 64; ++i)
    if (mask >> i & 1) t.push_back(i);
  return t;
}

class Analyzer {
 public:
  Analyzer(const profile::Profile& p, const Knobs& k) : p_(p), k_(k) {
    for (const auto& o : p.objects) by_serial_[o.serial] = &o;
    for (const auto& ir : p.instructions) by_ip_[ir.ip] = &ir;
    for (const auto& st : p.steps) steps_of_[st.ip] = &st;
    nlevels_ = p.geometry.levels.size();
    line_ = p.geometry.line();
    for (size_t l = 0; l < nlevels_; ++l) {
      level_misses_[l] = level_misses(p.counters[l]);
    }
    accesses_ = total_accesses(p.counters[0]);
  }

  Analysis run() {
    Analysis a;
    if (accesses_ == 0) {
      a.notes.push_back("the program made no recorded memory accesses");
      return a;
    }
    if (!gate_open(&a)) return a;
    sharing(&a);
    capacity_conflict(&a);
    for (Finding& f : a.findings) drop_minor_instructions(f);
    std::stable_sort(a.findings.begin(), a.findings.end(),
                     [](const Finding& x, const Finding& y) { return x.cost > y.cost; });
    return a;
  }

 private:
  bool gate_open(Analysis* a) {
    const auto& c = p_.counters[0];
    uint64_t loads = 0, stores = 0, load_miss = 0, store_miss = 0;
    for (int kd = 0; kd < profile::kKinds; ++kd) {
      loads += c.by_kind[kd][0];
      stores += c.by_kind[kd][1];
      if (kd != 0 && kd != kCompulsory) {
        load_miss += c.by_kind[kd][0];
        store_miss += c.by_kind[kd][1];
      }
    }
    double lr = loads ? double(load_miss) / double(loads) : 0;
    double sr = stores ? double(store_miss) / double(stores) : 0;
    if ((k_.min_load_miss_rate > 0 || k_.min_store_miss_rate > 0) && lr < k_.min_load_miss_rate &&
        sr < k_.min_store_miss_rate) {
      char b[256];
      std::snprintf(b, sizeof b,
                    "non-compulsory L1 miss rates (loads %.2f%%, stores %.2f%%) are below the "
                    "reporting thresholds (%.1f%%, %.1f%%): no significant cache problem",
                    100 * lr, 100 * sr, 100 * k_.min_load_miss_rate, 100 * k_.min_store_miss_rate);
      a->notes.push_back(b);
      return false;
    }
    return true;
  }

  // Instructions with under 1% of a finding's misses are noise (a final read of the data,
  // say); the first (most missing) one always stays.
  static void drop_minor_instructions(Finding& f) {
    uint64_t floor = f.misses / 100;
    auto& v = f.instructions;
    v.erase(std::remove_if(v.begin() + (v.empty() ? 0 : 1), v.end(),
                           [&](const InstrRef& r) { return r.misses < floor; }),
            v.end());
  }

  bool significant(uint64_t accesses, uint64_t misses, int level) const {
    return misses >= k_.min_misses && double(accesses) >= k_.min_access_share * double(accesses_) &&
           double(misses) >= k_.min_miss_share * double(level_misses_[level]);
  }

  ObjectRef heap_ref(const ObjectRecord& o) const {
    ObjectRef r;
    r.heap = true;
    r.serial = o.serial;
    r.start = o.start;
    r.size = o.size;
    r.alloc_thread = o.alloc_thread;
    r.site = o.site;
    r.threads = threads_of(o.thread_mask);
    for (int kd = kCapacity; kd < profile::kKinds; ++kd) r.misses += o.misses[kd];
    return r;
  }

  // The address of the first byte the line's threads wrote (else read; else the line's start).
  // A line's first byte may belong to a variable nobody touched (a global placed before the
  // shared one), so naming the line by its start would blame the neighbour.
  uint64_t touched_addr(const LineRecord& l) const {
    uint64_t w = 0, rd = 0;
    for (int i = 0; i < profile::kLineThreads; ++i)
      if (l.threads[i] != profile::kNoThread) w |= l.write_mask[i], rd |= l.read_mask[i];
    const uint64_t m = w ? w : rd;
    const uint64_t granule = std::max<uint64_t>(1, line_ / 64);
    return l.line * line_ + (m ? uint64_t(__builtin_ctzll(m)) * granule : 0);
  }

  // Two or more threads wrote the line; every two of them wrote a common byte (granule); no
  // writer wrote a byte no other writer wrote; and every thread on the line touched a byte two
  // writers wrote. Then no placement separates the threads (a lock word every thread swaps). A
  // thread's field of its own beside such bytes, or one thread that once wrote another's field,
  // leaves the line to the per-miss kinds (padding would still remove those misses).
  static bool writers_share_bytes(const LineRecord& l) {
    uint64_t w[profile::kLineThreads];
    int n = 0;
    for (int i = 0; i < profile::kLineThreads; ++i)
      if (l.threads[i] != profile::kNoThread && l.write_mask[i]) w[n++] = l.write_mask[i];
    if (n < 2) return false;
    uint64_t common = 0;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) {
        if ((w[i] & w[j]) == 0) return false;
        common |= w[i] & w[j];
      }
    for (int i = 0; i < n; ++i)
      if (w[i] & ~common) return false;
    for (int i = 0; i < profile::kLineThreads; ++i)
      if (l.threads[i] != profile::kNoThread && ((l.read_mask[i] | l.write_mask[i]) & common) == 0) return false;
    return true;
  }

  // ---- sharing: one finding per heap object (or per line outside the heap) ----
  void sharing(Analysis* a) {
    struct Group {
      std::vector<const LineRecord*> lines;
      uint64_t fs = 0, ts = 0;  // as counted, per miss
      uint64_t moved = 0;       // of fs, on lines writers_share_bytes() gives to true sharing
    };
    std::map<std::pair<uint64_t, uint64_t>, Group> groups;  // (object serial, or 0 and line)
    for (const LineRecord& l : p_.lines) {
      uint64_t serial = l.object_count == 1 ? l.objects[0] : 0;
      auto key = serial ? std::make_pair(serial, uint64_t(0)) : std::make_pair(uint64_t(0), l.line);
      Group& g = groups[key];
      g.lines.push_back(&l);
      // A line whose writers all write some of the same bytes cannot be fixed by giving each
      // thread its own line (a lock word, a shared counter inside a struct): its misses on bytes
      // the last writer did not write (the mutex's kind field read before the lock word is
      // swapped) still come from the threads' common bytes, so they count as true sharing.
      g.fs += l.misses[kFalse];
      g.ts += l.misses[kTrue];
      if (writers_share_bytes(l)) g.moved += l.misses[kFalse];
    }
    for (auto& [key, g] : groups) {
      Finding f;
      f.kind = g.fs - g.moved >= g.ts + g.moved ? Kind::FalseSharing : Kind::TrueSharing;
      f.level = 0;
      f.misses = g.fs + g.ts;
      uint64_t accesses = 0;
      std::set<uint64_t> ips;
      std::map<uint32_t, LineThread> threads;
      std::set<uint64_t> serials;
      for (const LineRecord* l : g.lines) {
        for (uint64_t ip : l->ips)
          if (ip) ips.insert(ip);
        for (int i = 0; i < profile::kLineThreads; ++i) {
          if (l->threads[i] == profile::kNoThread) continue;
          LineThread& t = threads[l->threads[i]];
          t.thread = l->threads[i];
          t.read_mask |= l->read_mask[i];
          t.write_mask |= l->write_mask[i];
        }
        for (int i = 0; i < profile::kRefs; ++i)
          if (l->objects[i]) serials.insert(l->objects[i]);
      }
      for (uint64_t ip : ips) {
        uint64_t m = 0;
        if (auto it = by_ip_.find(ip); it != by_ip_.end()) {
          m = it->second->misses[0][kFalse] + it->second->misses[0][kTrue];
          accesses += it->second->accesses[0] + it->second->accesses[1];
        }
        f.instructions.push_back({ip, m});
      }
      if (!significant(accesses, f.misses, 0)) continue;
      std::sort(f.instructions.begin(), f.instructions.end(),
                [](const InstrRef& x, const InstrRef& y) { return x.misses > y.misses; });
      for (auto& [t, lt] : threads) f.line_threads.push_back(lt);
      std::set<uint32_t> alloc_threads, users;
      for (uint64_t s : serials) {
        auto it = by_serial_.find(s);
        if (it == by_serial_.end()) continue;
        ObjectRef r = heap_ref(*it->second);
        alloc_threads.insert(r.alloc_thread);
        users.insert(r.threads.begin(), r.threads.end());
        f.objects.push_back(std::move(r));
      }
      if (f.objects.empty()) {
        ObjectRef r;  // not on the heap: named at report time from an address on the line
        r.sample_addr = touched_addr(*g.lines.front());
        r.misses = f.misses;
        f.objects.push_back(r);
      }
      const bool allocator = f.kind == Kind::FalseSharing && f.objects.size() >= 2 &&
                             alloc_threads.size() >= 2 && users.size() >= 2;
      f.origin = allocator ? Origin::Allocator : Origin::Application;
      f.line_addr = g.lines.front()->line * line_;
      f.lines = uint32_t(g.lines.size());
      f.share = level_misses_[0] ? double(f.misses) / double(level_misses_[0]) : 0;
      f.cost = double(f.misses) * k_.penalty_coherence;
      f.evidence.push_back(num("false_sharing_misses", double(g.fs)));
      f.evidence.push_back(num("true_sharing_misses", double(g.ts)));
      if (g.moved)  // counted as false sharing, judged true sharing by the line's common bytes
        f.evidence.push_back(num("false_sharing_misses_on_common_bytes", double(g.moved)));
      f.evidence.push_back(num("lines", double(g.lines.size())));
      f.evidence.push_back(num("threads", double(threads.size())));
      if (f.origin == Origin::Allocator)
        f.evidence.push_back(num("allocating_threads", double(alloc_threads.size())));
      f.suggestion = suggestion(f);
      a->findings.push_back(std::move(f));
    }
  }

  // ---- capacity and conflict: per instruction, grouped by the heap objects they touch ----
  void capacity_conflict(Analysis* a) {
    struct Cand {
      const InstructionRecord* ir;
      Kind kind;
      int level;
      uint64_t misses;
      double cost;
    };
    std::vector<Cand> cands;
    for (const InstructionRecord& ir : p_.instructions) {
      uint64_t acc = ir.accesses[0] + ir.accesses[1];
      Cand best{&ir, Kind::Capacity, -1, 0, 0};
      for (size_t l = 0; l < nlevels_; ++l) {
        for (int kd : {kCapacity, kConflict}) {
          uint64_t m = ir.misses[l][kd];
          if (!significant(acc, m, int(l))) continue;
          double cost = double(m) * k_.penalty_next_level[l];
          if (cost > best.cost) best = {&ir, kd == kConflict ? Kind::Conflict : Kind::Capacity, int(l), m, cost};
        }
      }
      if (best.level >= 0) cands.push_back(best);
    }
    // Instructions of one kind and level form one finding when they touch a common heap object,
    // or, for conflicts, when their misses fall in common L1 sets from nearby code (an unrolled
    // loop whose copies each walk another object are one conflict).
    auto near = [](uint64_t x, uint64_t y) { return (x > y ? x - y : y - x) < kNearCode; };
    std::vector<bool> used(cands.size(), false);
    for (size_t i = 0; i < cands.size(); ++i) {
      if (used[i]) continue;
      used[i] = true;
      std::vector<const Cand*> members{&cands[i]};
      std::set<uint64_t> objs(std::begin(cands[i].ir->objects), std::end(cands[i].ir->objects));
      objs.erase(0);
      uint64_t sets = cands[i].ir->l1_set_mask;
      for (bool grew = true; grew;) {
        grew = false;
        for (size_t j = i + 1; j < cands.size(); ++j) {
          const Cand& c = cands[j];
          if (used[j] || c.kind != cands[i].kind || c.level != cands[i].level) continue;
          bool joins = false;
          for (uint64_t s : c.ir->objects) joins |= s && objs.count(s);
          if (!joins && c.kind == Kind::Conflict && (c.ir->l1_set_mask & sets))
            for (const Cand* m : members) joins |= near(m->ir->ip, c.ir->ip);
          if (!joins) continue;
          used[j] = true;
          grew = true;
          members.push_back(&c);
          sets |= c.ir->l1_set_mask;
          for (uint64_t s : c.ir->objects)
            if (s) objs.insert(s);
        }
      }
      a->findings.push_back(make_cc_finding(members, objs));
    }
  }

  template <typename CandT>
  Finding make_cc_finding(const std::vector<const CandT*>& members, const std::set<uint64_t>& serials) {
    Finding f;
    f.kind = members[0]->kind;
    f.level = members[0]->level;
    uint64_t set_mask = 0;
    bool more_objects = false;
    std::set<uint64_t> addrs;
    for (const CandT* c : members) {
      f.misses += c->misses;
      f.cost += c->cost;
      f.instructions.push_back({c->ir->ip, c->misses});
      set_mask |= c->ir->l1_set_mask;
      more_objects |= c->ir->object_count > uint32_t(profile::kRefs);
      for (uint64_t a : c->ir->sample_addrs)
        if (a) addrs.insert(a);
    }
    std::sort(f.instructions.begin(), f.instructions.end(),
              [](const InstrRef& x, const InstrRef& y) { return x.misses > y.misses; });
    f.share = level_misses_[f.level] ? double(f.misses) / double(level_misses_[f.level]) : 0;
    // Heap objects, and whether the allocator lined them up on the same sets.
    const LevelGeometry& l1 = p_.geometry.levels[0];
    const uint64_t period = l1.sets() * l1.line;
    std::map<uint64_t, int> offsets;  // start modulo the L1 set period -> objects
    for (uint64_t s : serials) {
      auto it = by_serial_.find(s);
      if (it == by_serial_.end()) continue;
      f.objects.push_back(heap_ref(*it->second));
      offsets[(it->second->start % period) / l1.line]++;
    }
    int aligned = 0;
    for (auto& [off, n] : offsets) aligned = std::max(aligned, n);
    // A conflict is the allocator's only when several heap objects sit at the same set offset
    // AND most of their conflict misses were not caused by each object's own lines (a stride
    // within one object, which staggering the objects cannot fix: pad it instead).
    uint64_t conflicts = 0, self = 0;
    for (uint64_t s : serials)
      if (auto it = by_serial_.find(s); it != by_serial_.end())
        conflicts += it->second->misses[kConflict], self += it->second->self_conflicts;
    const bool self_made =
        f.kind == Kind::Conflict && f.level == 0 && conflicts > 0 && 2 * self >= conflicts;
    const bool allocator =
        f.kind == Kind::Conflict && f.objects.size() >= 2 && aligned >= 2 && !self_made;
    f.origin = allocator ? Origin::Allocator : Origin::Application;
    if (f.objects.empty())
      for (uint64_t a : addrs) {  // globals and other non-heap data, named at report time
        ObjectRef r;
        r.sample_addr = a;
        f.objects.push_back(r);
        break;
      }
    int sets = __builtin_popcountll(set_mask);
    f.evidence.push_back(num("misses_at_level", double(f.misses)));
    f.evidence.push_back(num("l1_sets_touched", double(sets),
                             std::to_string(sets) + " of " + std::to_string(std::min<uint64_t>(64, l1.sets())) +
                                 (l1.sets() > 64 ? " (set index mod 64)" : "")));
    for (size_t l = 0; l < nlevels_; ++l) {
      uint64_t cap = 0, conf = 0;
      for (const CandT* c : members) cap += c->ir->misses[l][kCapacity], conf += c->ir->misses[l][kConflict];
      f.evidence.push_back(txt(p_.geometry.levels[l].name + "_capacity_conflict",
                               std::to_string(cap) + " capacity, " + std::to_string(conf) + " conflict"));
    }
    if (!f.objects.empty() && f.objects[0].heap) {
      f.evidence.push_back(num("heap_objects", double(f.objects.size()),
                               std::to_string(f.objects.size()) + (more_objects ? "+" : "")));
      f.evidence.push_back(num("objects_at_same_set_offset", aligned));
      if (f.kind == Kind::Conflict && self > 0)
        f.evidence.push_back(num("self_conflicts", double(self),
                                 std::to_string(self) + " of the objects' " + std::to_string(conflicts) +
                                     " L1 conflict misses: evicted by the same object's own lines"));
    }
    if (f.kind == Kind::Capacity) pattern_of(members, &f);
    f.suggestion = suggestion(f);
    return f;
  }

  // How the finding's instructions walk memory, from the steps between their consecutive misses
  // (StepRecord): the kind that makes at least half of them, if any.
  template <typename CandT>
  void pattern_of(const std::vector<const CandT*>& members, Finding* f) const {
    uint64_t steps[profile::kStepKinds] = {}, checked = 0, total = 0;
    int64_t stride = 0;
    uint64_t stride_steps = 0;
    for (const CandT* c : members) {
      auto it = steps_of_.find(c->ir->ip);
      if (it == steps_of_.end()) continue;
      const profile::StepRecord& r = *it->second;
      for (int k = 0; k < profile::kStepKinds; ++k) steps[k] += r.steps[k], total += r.steps[k];
      checked += r.pointer_checked;
      if (r.steps[profile::kStepStride] > stride_steps) stride = r.stride, stride_steps = r.steps[profile::kStepStride];
    }
    if (total < 16) return;  // too few steps to tell
    int best = 0;
    for (int k = 1; k < profile::kStepKinds; ++k)
      if (steps[k] > steps[best]) best = k;
    // Pointers and irregular steps together are data-dependent access; pointers decide when the
    // check ran on most of those steps and most of the checked ones followed a pointer.
    const uint64_t scattered = steps[profile::kStepPointer] + steps[profile::kStepIrregular];
    Pattern pat = Pattern::Unknown;
    if (steps[best] * 2 >= total && best == profile::kStepNext) pat = Pattern::Sweep;
    else if (steps[best] * 2 >= total && best == profile::kStepStride) pat = Pattern::Strided;
    else if (scattered * 2 >= total)
      pat = checked * 2 < scattered ? Pattern::Scattered
            : steps[profile::kStepPointer] * 2 >= checked ? Pattern::PointerChase
                                                         : Pattern::Random;
    if (pat == Pattern::Unknown) return;
    f->pattern = pat;
    f->stride = pat == Pattern::Strided ? stride : 0;
    auto pct = [&](uint64_t n) { return std::to_string(int(100.0 * double(n) / double(total) + 0.5)) + "%"; };
    std::string text;
    switch (pat) {
      case Pattern::Sweep: text = "sequential sweep: " + pct(steps[profile::kStepNext]) + " of consecutive misses a line or two apart"; break;
      case Pattern::Strided:
        text = "strided walk: " + pct(steps[profile::kStepStride]) + " of consecutive misses " +
               std::to_string(stride) + " bytes apart";
        break;
      case Pattern::PointerChase:
        text = "pointer chasing: " + pct(steps[profile::kStepPointer]) +
               " of consecutive misses land where a value in the previously missed line points";
        break;
      case Pattern::Random: text = "random access: " + pct(steps[profile::kStepIrregular]) + " of consecutive misses at irregular distances, not following pointers"; break;
      case Pattern::Scattered: text = "scattered access: " + pct(scattered) + " of consecutive misses at irregular distances (random indexing or pointer chasing: not checked)"; break;
      case Pattern::Unknown: break;
    }
    f->evidence.push_back(num("access_pattern", double(total), text + " (" + std::to_string(total) + " steps)"));
  }

  std::string suggestion(const Finding& f) const {
    const std::string line = std::to_string(line_);
    switch (f.kind) {
      case Kind::FalseSharing:
        return f.origin == Origin::Allocator
                   ? "the allocator put objects of different threads on one line: allocate them with "
                     "aligned_alloc(" + line + ", ...) or pad them to " + line +
                         " bytes, or use an allocator with per-thread heaps"
                   : "pad or align each thread's data to its own " + line +
                         "-byte line (e.g. alignas(" + line + ") on the per-thread field)";
      case Kind::TrueSharing:
        return "threads update the same bytes: keep per-thread copies (locals or thread-local) "
               "and combine them once";
      case Kind::Conflict:
        return f.origin == Origin::Allocator
                   ? "heap objects start at the same offset within the set period and map to the "
                     "same sets: stagger their start addresses (offset each by a few lines) or use "
                     "an allocator that does not align them alike"
                   : "the accesses stride through few sets (a power-of-two stride): pad the rows "
                     "(e.g. one extra line per row) or interchange the loops";
      case Kind::Capacity: {
        const std::string level = p_.geometry.levels[f.level].name;
        switch (f.pattern) {
          case Pattern::Sweep:
            return "the loop sweeps the data in order and comes back to it only after more than " +
                   level + " holds: tile the loops so each cache-sized block gets all its passes "
                   "before the next, or fuse the passes into one";
          case Pattern::Strided:
            return "the loop walks memory with a stride of " + std::to_string(f.stride) +
                   " bytes (e.g. down a column of a row-major array) and uses little of each line "
                   "before it leaves " + level + ": interchange the loops so the inner one walks "
                   "contiguous memory, or block the walk so each line is used up while cached";
          case Pattern::PointerChase:
            return "the loop follows pointers to nodes scattered over more memory than " + level +
                   " holds: allocate the nodes contiguously in traversal order (a pool, or an array "
                   "with indices), make them smaller, or prefetch the next node early";
          case Pattern::Random:
            return "the loop reads data-dependent places (hashing or random indexing) in more "
                   "memory than " + level + " holds: shrink the entries (compact keys, smaller "
                   "records), partition the work so each part's data fits (e.g. radix-partition by "
                   "key), or batch the lookups and prefetch them";
          case Pattern::Scattered:
            return "the loop reads scattered places (random indexing or pointer chasing) in more "
                   "memory than " + level + " holds: shrink the data or make it contiguous in the "
                   "order it is used, partition the work so each part fits, or prefetch ahead";
          case Pattern::Unknown: break;
        }
        return "the data touched between reuses exceeds " + level +
               ": tile or block the loops so each block fits, or fuse passes over the data";
      }
    }
    return "";
  }

  const profile::Profile& p_;
  const Knobs& k_;
  std::unordered_map<uint64_t, const ObjectRecord*> by_serial_;
  std::unordered_map<uint64_t, const InstructionRecord*> by_ip_;
  std::unordered_map<uint64_t, const profile::StepRecord*> steps_of_;
  size_t nlevels_ = 0;
  uint32_t line_ = 64;
  uint64_t level_misses_[profile::kLevels] = {};
  uint64_t accesses_ = 0;
};

}  // namespace

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::Unknown: return "unknown";
    case Pattern::Sweep: return "sweep";
    case Pattern::Strided: return "strided";
    case Pattern::PointerChase: return "pointer_chase";
    case Pattern::Random: return "random";
    case Pattern::Scattered: return "scattered";
  }
  return "?";
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::FalseSharing: return "false_sharing";
    case Kind::TrueSharing: return "true_sharing";
    case Kind::Conflict: return "conflict";
    case Kind::Capacity: return "capacity";
  }
  return "?";
}

const char* origin_name(Origin o) { return o == Origin::Allocator ? "allocator" : "application"; }

Analysis analyze(const profile::Profile& p, const Knobs& k) { return Analyzer(p, k).run(); }

std::string byte_ranges(uint64_t mask, uint32_t granule) {
  std::string out;
  for (int i = 0; i < 64;) {
    if (!(mask >> i & 1)) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < 64 && (mask >> (j + 1) & 1)) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(i * granule) + "-" + std::to_string((j + 1) * granule - 1);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

}  // namespace whymiss::analysis
