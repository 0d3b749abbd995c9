// Differential test: the optimised Hierarchy against RefSim, a deliberately slow and obvious
// model of the rules in sim.h written for this test only. Random multi-core traces over several
// geometries, every policy (Random is deterministic: the reference replays the same per-set
// xorshift streams), inclusive and non-inclusive shared levels, with the locks switched on and
// off mid-trace. Every access must give the same per-line outcome at every level, and the
// counters must agree. A fast path or data-structure change that alters any miss kind fails here.
//
// RefSim mirrors the documented behaviour, including its corners: only the last private level
// back-invalidates closer ones; a shared-level eviction's inclusion record replaces a pending
// coherence record; snoops look a line up in the last private level.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sim_test_util.h"

namespace whymiss::sim {
namespace {

enum class St { I, S, E, M };

struct RefWay {
  bool valid = false;
  uint64_t line = 0;
  uint64_t mask = 0;
  St st = St::I;
  bool dirty = false;
};

// One set-associative array with its replacement state kept in the plainest form.
struct RefCache {
  uint64_t sets;
  uint32_t ways;
  Policy policy;
  std::vector<std::vector<RefWay>> way;        // [set][way]
  std::vector<std::vector<uint32_t>> recency;  // LRU: ways, most recent first
  std::vector<std::vector<bool>> plru;         // tree-PLRU node bits, heap order (1 = root)
  std::vector<uint64_t> rng;                   // Random: per-set xorshift state

  RefCache(uint64_t s, uint32_t w, Policy p, uint64_t seed)
      : sets(s),
        ways(w),
        policy(p == Policy::TreePLRU && w == 1 ? Policy::LRU : p),
        way(s, std::vector<RefWay>(w)),
        recency(s),
        plru(s, std::vector<bool>(2 * w, false)),
        rng(s) {
    for (uint64_t i = 0; i < s; ++i)
      rng[i] = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xBF58476D1CE4E5B9ull;
  }
  uint64_t set_of(uint64_t line) const { return line % sets; }
  RefWay* find(uint64_t line) {
    for (RefWay& x : way[set_of(line)])
      if (x.valid && x.line == line) return &x;
    return nullptr;
  }
  uint32_t way_index(const RefWay* x) const {
    for (uint64_t s = 0; s < sets; ++s)
      for (uint32_t w = 0; w < ways; ++w)
        if (&way[s][w] == x) return w;
    ADD_FAILURE();
    return 0;
  }
  void touch(uint64_t set, uint32_t w) {
    if (policy == Policy::LRU) {
      auto& r = recency[set];
      r.erase(std::remove(r.begin(), r.end(), w), r.end());
      r.insert(r.begin(), w);
    } else if (policy == Policy::TreePLRU) {
      // Walk from the root towards leaf w; every node on the path points to the other half.
      uint32_t lo = 0, hi = ways, node = 1;
      while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        bool right = w >= mid;
        plru[set][node] = !right;  // true = evict from the right half next
        node = 2 * node + (right ? 1 : 0);
        (right ? lo : hi) = mid;
      }
    }
  }
  uint32_t victim(uint64_t set) {
    if (policy == Policy::LRU) return recency[set].back();
    if (policy == Policy::TreePLRU) {
      uint32_t lo = 0, hi = ways, node = 1;
      while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        bool right = plru[set][node];
        node = 2 * node + (right ? 1 : 0);
        (right ? lo : hi) = mid;
      }
      return lo;
    }
    uint64_t x = rng[set];
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng[set] = x;
    return uint32_t(x % ways);
  }
  // The way a new line of `set` goes to: the first invalid way, else the policy's victim.
  uint32_t fill_way(uint64_t set) {
    for (uint32_t w = 0; w < ways; ++w)
      if (!way[set][w].valid) return w;
    return victim(set);
  }
};

// Fully-associative LRU: a list of lines, most recent first.
struct RefFa {
  size_t cap;
  std::vector<uint64_t> lines;
  bool access(uint64_t line) {
    auto it = std::find(lines.begin(), lines.end(), line);
    bool hit = it != lines.end();
    if (hit)
      lines.erase(it);
    else if (lines.size() == cap)
      lines.pop_back();
    lines.insert(lines.begin(), line);
    return hit;
  }
  bool contains(uint64_t line) const {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  }
};

struct RefDeparture {
  uint64_t writer_mask = 0, my_mask = 0;
  uint32_t writer_core = 0;
  unsigned coherence_levels = 0, inclusion_levels = 0;
  Outcome inclusion_kind = Outcome::Capacity;
};

class RefSim {
 public:
  RefSim(const CacheGeometry& g, const Knobs& k) : k_(k) {
    const size_t n = g.levels.size();
    shared_ = n >= 2;
    npriv_ = shared_ ? n - 1 : n;
    line_ = g.levels[0].line;
    granule_ = line_ > 64 ? line_ / 64 : 1;
    for (uint32_t c = 0; c < k.cores; ++c) {
      Core core;
      for (size_t l = 0; l < npriv_; ++l) {
        const auto& lg = g.levels[l];
        core.priv.emplace_back(lg.sets(), lg.ways, k.policy, k.seed * 1000003u + c * 131u + l);
        core.shadow.push_back(RefFa{size_t(lg.size / lg.line), {}});
      }
      cores_.push_back(std::move(core));
    }
    if (shared_) {
      const auto& lg = g.levels.back();
      llc_.emplace_back(lg.sets(), lg.ways, k.policy, k.seed * 7919u);
      llc_shadow_.cap = size_t(lg.size / lg.line);
    }
  }

  // All pieces of the access, in order.
  std::vector<LineResult> access(uint32_t c, uint64_t addr, uint32_t size, bool w) {
    if (size == 0) size = 1;
    std::vector<LineResult> out;
    counters_.accesses++;
    for (uint64_t ln = addr / line_; ln <= (addr + size - 1) / line_; ++ln) {
      uint64_t gm = 0;
      for (uint64_t b = std::max(addr, ln * line_); b < std::min(addr + size, (ln + 1) * line_);
           ++b)
        gm |= uint64_t(1) << ((b % line_) / granule_);
      out.push_back(piece(c, ln, gm, w));
    }
    return out;
  }
  const Counters& counters() const { return counters_; }

 private:
  struct Core {
    std::vector<RefCache> priv;
    std::vector<RefFa> shadow;
    std::set<uint64_t> seen;
  };

  void count(size_t l, Outcome o, bool w) { counters_.level[l].by_outcome[int(o)][w]++; }
  RefCache& llc() { return llc_[0]; }

  LineResult piece(uint32_t c, uint64_t line, uint64_t gm, bool w) {
    Core& me = cores_[c];
    LineResult r;
    r.line = line;
    r.access_mask = gm;
    counters_.line_accesses++;
    size_t hit_level = npriv_;
    bool first = false;
    for (size_t l = 0; l < npriv_; ++l) {
      bool shadow_hit = me.shadow[l].access(line);
      if (me.priv[l].find(line)) {
        hit_level = l;
        r.level[l] = Outcome::Hit;
        count(l, Outcome::Hit, w);
        break;
      }
      if (l == 0) first = me.seen.insert(line).second;
      Outcome o = shadow_hit ? Outcome::Conflict : Outcome::Capacity;
      if (first) {
        o = Outcome::Compulsory;
      } else if (auto it = departures_.find({line, c}); it != departures_.end()) {
        const RefDeparture& d = it->second;
        if (d.coherence_levels & (1u << l)) {
          r.writer_core = d.writer_core;
          r.writer_mask = d.writer_mask;
          r.tenure_mask = d.my_mask;
          o = (d.writer_mask & (d.my_mask | gm)) ? Outcome::TrueSharing : Outcome::FalseSharing;
        } else if (d.inclusion_levels & (1u << l)) {
          o = d.inclusion_kind;
        }
      }
      r.level[l] = o;
      count(l, o, w);
    }
    St st;
    if (hit_level < npriv_) {
      RefCache& hc = me.priv[hit_level];
      RefWay* x = hc.find(line);
      hc.touch(hc.set_of(line), hc.way_index(x));
      st = x->st;
      r.levels_reached = uint8_t(hit_level + 1);
      if (w && st == St::S) {
        snoop(c, line, gm, true, r);
        r.upgrade = 1;
        counters_.level[hit_level].upgrades++;
      }
      if (w && st != St::M) {
        st = St::M;
        for (RefCache& pc : me.priv)
          if (RefWay* y = pc.find(line)) y->st = st;
      }
      for (size_t l = hit_level; l-- > 0;) fill_private(c, l, line, st);
    } else {
      bool others = snoop(c, line, gm, w, r);
      st = w ? St::M : (others ? St::S : St::E);
      if (shared_)
        access_llc(line, w, r);
      else
        r.levels_reached = uint8_t(npriv_ + 1);
      for (size_t l = npriv_; l-- > 0;) fill_private(c, l, line, st);
      departures_.erase({line, c});
    }
    RefWay* x = me.priv[0].find(line);
    x->mask |= gm;
    x->dirty = x->dirty || w;
    return r;
  }

  void write_back_to_llc(uint64_t line) {
    if (!shared_) return;
    if (RefWay* x = llc().find(line)) x->dirty = true;
  }

  void fill_private(uint32_t c, size_t l, uint64_t line, St st) {
    Core& me = cores_[c];
    RefCache& pc = me.priv[l];
    uint64_t set = pc.set_of(line);
    uint32_t w = pc.fill_way(set);
    RefWay& slot = pc.way[set][w];
    if (slot.valid) {
      RefWay old = slot;
      slot = RefWay{};
      if (l + 1 == npriv_) {  // leaving the core: closer levels drop it too
        bool dirty = old.dirty;
        RefDeparture d;
        for (size_t u = 0; u < l; ++u) {
          if (RefWay* y = me.priv[u].find(old.line)) {
            dirty = dirty || y->dirty;
            *y = RefWay{};
            counters_.level[u].back_invalidations++;
            d.inclusion_levels |= 1u << u;
          }
        }
        if (d.inclusion_levels) {
          d.inclusion_kind =
              me.shadow[l].contains(old.line) ? Outcome::Conflict : Outcome::Capacity;
          departures_[{old.line, c}] = d;
        }
        if (dirty) {
          counters_.level[l].writebacks++;
          write_back_to_llc(old.line);
        }
      } else {  // moves its mask and dirt to the next private level, if that holds it
        if (RefWay* y = me.priv[l + 1].find(old.line)) {
          y->mask |= old.mask;
          y->dirty = y->dirty || old.dirty;
        }
        if (old.dirty) counters_.level[l].writebacks++;
      }
    }
    slot = RefWay{true, line, 0, st, false};
    pc.touch(set, w);
  }

  bool snoop(uint32_t c, uint64_t line, uint64_t gm, bool w, LineResult& r) {
    bool others = false;
    for (uint32_t q = 0; q < cores_.size(); ++q) {
      if (q == c) continue;
      Core& o = cores_[q];
      if (!o.priv[npriv_ - 1].find(line)) continue;
      if (w) {
        RefDeparture d;
        d.writer_mask = gm;
        d.writer_core = c;
        for (size_t l = 0; l < npriv_; ++l) {
          if (RefWay* y = o.priv[l].find(line)) {
            d.my_mask |= y->mask;
            d.coherence_levels |= 1u << l;
            *y = RefWay{};
            counters_.level[l].coherence_invalidations++;
          }
        }
        departures_[{line, q}] = d;
        if (r.invalidated < UINT16_MAX) r.invalidated++;
      } else {
        others = true;
        for (size_t l = 0; l < npriv_; ++l) {
          if (RefWay* y = o.priv[l].find(line)) {
            if (y->dirty) {
              y->dirty = false;
              counters_.level[l].writebacks++;
              write_back_to_llc(line);
            }
            y->st = St::S;
          }
        }
      }
    }
    return others;
  }

  void access_llc(uint64_t line, bool w, LineResult& r) {
    const size_t s = npriv_;
    bool shadow_hit = llc_shadow_.access(line);
    if (RefWay* x = llc().find(line)) {
      llc().touch(llc().set_of(line), llc().way_index(x));
      r.level[s] = Outcome::Hit;
      r.levels_reached = uint8_t(s + 1);
      count(s, Outcome::Hit, w);
      return;
    }
    Outcome o = llc_seen_.insert(line).second ? Outcome::Compulsory
                : shadow_hit                  ? Outcome::Conflict
                                              : Outcome::Capacity;
    r.level[s] = o;
    r.levels_reached = uint8_t(s + 2);
    count(s, o, w);
    uint64_t set = llc().set_of(line);
    uint32_t wy = llc().fill_way(set);
    RefWay& slot = llc().way[set][wy];
    if (slot.valid) {
      RefWay old = slot;
      slot = RefWay{};
      bool dirty = old.dirty;
      if (k_.inclusive_llc) {
        Outcome why = llc_shadow_.contains(old.line) ? Outcome::Conflict : Outcome::Capacity;
        for (uint32_t q = 0; q < cores_.size(); ++q) {
          RefDeparture d;
          for (size_t l = 0; l < npriv_; ++l) {
            if (RefWay* y = cores_[q].priv[l].find(old.line)) {
              dirty = dirty || y->dirty;
              *y = RefWay{};
              counters_.level[l].back_invalidations++;
              d.inclusion_levels |= 1u << l;
            }
          }
          if (d.inclusion_levels) {
            d.inclusion_kind = why;
            departures_[{old.line, q}] = d;
          }
        }
      }
      if (dirty) counters_.level[s].writebacks++;
    }
    slot = RefWay{true, line, 0, St::E, false};
    llc().touch(set, wy);
  }

  Knobs k_;
  bool shared_ = false;
  size_t npriv_ = 0;
  uint64_t line_ = 64, granule_ = 1;
  std::vector<Core> cores_;
  std::vector<RefCache> llc_;  // zero or one
  RefFa llc_shadow_{0, {}};
  std::set<uint64_t> llc_seen_;
  std::map<std::pair<uint64_t, uint32_t>, RefDeparture> departures_;
  Counters counters_;
};

std::string describe(const LineResult& r) {
  std::string s = "line " + std::to_string(r.line) + " reached " + std::to_string(r.levels_reached);
  for (size_t l = 0; l < kMaxLevels; ++l) s += std::string(" ") + outcome_name(r.level[l]);
  s += " upg " + std::to_string(r.upgrade) + " inv " + std::to_string(r.invalidated) + " am " +
       std::to_string(r.access_mask) + " wc " + std::to_string(r.writer_core) + " wm " +
       std::to_string(r.writer_mask) + " tm " + std::to_string(r.tenure_mask);
  return s;
}

bool same(const LineResult& a, const LineResult& b) {
  return a.line == b.line && a.level == b.level && a.levels_reached == b.levels_reached &&
         a.upgrade == b.upgrade && a.invalidated == b.invalidated &&
         a.access_mask == b.access_mask && a.writer_core == b.writer_core &&
         a.writer_mask == b.writer_mask && a.tenure_mask == b.tenure_mask;
}

void expect_same_counters(const Counters& got, const Counters& want, size_t nlevels) {
  EXPECT_EQ(got.accesses, want.accesses);
  EXPECT_EQ(got.line_accesses, want.line_accesses);
  for (size_t l = 0; l < nlevels; ++l) {
    const LevelCounters &g = got.level[l], &w = want.level[l];
    for (int o = 0; o < kNumOutcomes; ++o)
      for (int rw = 0; rw < 2; ++rw)
        EXPECT_EQ(g.by_outcome[o][rw], w.by_outcome[o][rw])
            << "L" << l + 1 << " " << outcome_name(Outcome(o)) << (rw ? " write" : " read");
    EXPECT_EQ(g.writebacks, w.writebacks) << "L" << l + 1;
    EXPECT_EQ(g.upgrades, w.upgrades) << "L" << l + 1;
    EXPECT_EQ(g.coherence_invalidations, w.coherence_invalidations) << "L" << l + 1;
    EXPECT_EQ(g.back_invalidations, w.back_invalidations) << "L" << l + 1;
  }
}

struct Config {
  const char* name;
  CacheGeometry geo;
};

std::vector<Config> configs() {
  using testing::geo;
  return {
      {"one level", geo({{"L1", 1024, 4, 64}})},
      {"two levels", geo({{"L1", 1024, 4, 64}, {"L2", 4096, 8, 64}})},
      {"three levels", geo({{"L1", 512, 2, 64}, {"L2", 2048, 4, 64}, {"L3", 8192, 8, 64}})},
      {"four levels",
       geo({{"L1", 512, 2, 64}, {"L2", 1024, 4, 64}, {"L3", 2048, 4, 64}, {"L4", 8192, 8, 64}})},
      {"128-byte lines", geo({{"L1", 2048, 4, 128}, {"L2", 8192, 8, 128}})},
      {"fully associative L1", geo({{"L1", 1024, 16, 64}, {"L2", 4096, 4, 64}})},
      {"12-way, 32-byte lines", geo({{"L1", 3 * 1024, 12, 32}, {"L2", 6 * 1024, 12, 32}})},
      // More than 16 ways: the caches keep no fingerprint or rank rows (the other code paths).
      {"24- and 32-way levels",
       geo({{"L1", 1024, 2, 64}, {"L2", 3 * 1024, 24, 64}, {"L3", 8192, 32, 64}})},
  };
}

// Runs one configuration: `n` random accesses by `cores` cores over a region a few times the
// last level, with a hot part so that hits, reuse, sharing and upgrades all happen.
// Returns the hierarchy's counters (for checking that the traces reach every rule). `pick`, when
// not empty, lists the cores the trace uses (else all of them).
Counters run(const Config& cfg, Knobs k, uint64_t seed, size_t n,
             const std::vector<uint32_t>& pick = {}) {
  SCOPED_TRACE(std::string(cfg.name) + ", " + policy_name(k.policy) +
               (k.inclusive_llc ? ", inclusive" : ", non-inclusive") +
               (k.parallel ? ", parallel (messages)" : "") + ", " +
               std::to_string(k.cores) + " cores, seed " + std::to_string(seed));
  auto h = testing::make(cfg.geo, k);
  if (!h) return {};
  RefSim ref(cfg.geo, k);
  std::mt19937_64 rng(seed);
  const uint64_t span = cfg.geo.levels.back().size * 3;
  const uint32_t sizes[] = {1, 2, 4, 8, 8, 8, 16, 3, 64, 200};
  for (size_t i = 0; i < n; ++i) {
    // Switch the locks on and off at random points: results must not depend on it.
    if (i % 997 == 0) h->set_concurrent(rng() % 2);
    const uint32_t core = pick.empty() ? uint32_t(rng() % k.cores) : pick[rng() % pick.size()];
    const uint64_t r = rng() % 8;
    uint64_t a = r < 5 ? rng() % 512 : r < 7 ? rng() % (span / 8) : rng() % span;
    // Runs of nearby accesses by one core, as loops make, so the memo and L1 paths are used.
    if (rng() % 3 == 0) a = (rng() % 64) * 8;
    const uint32_t size = sizes[rng() % 10];
    const bool w = rng() % 3 == 0;
    const uint64_t addr = 0x10000 + a;
    std::vector<LineResult> want = ref.access(core, addr, size, w);
    AccessResult got;
    bool l1_hit = false;
    if (i % 3 == 2 && !h->knobs().concurrent) {
      // The exact runtime's order while not concurrent: the memo, then access().
      l1_hit = h->hit_memo(core)->try_hit(addr, size, w) || h->access(core, addr, size, w, got);
    } else if (i % 2) {
      got = h->access(core, addr, size, w);
    } else {
      l1_hit = h->access(core, addr, size, w, got);
    }
    if (l1_hit) {
      // Allowed only for a single-line pure L1 hit; the other overload would have said so.
      EXPECT_EQ(want.size(), 1u) << "access " << i;
      LineResult hit;
      hit.line = want[0].line;
      hit.level[0] = Outcome::Hit;
      hit.levels_reached = 1;
      hit.access_mask = want[0].access_mask;
      EXPECT_TRUE(same(hit, want[0]))
          << "access " << i << ": fast hit, reference " << describe(want[0]);
      if (!same(hit, want[0])) return {};
      continue;
    }
    EXPECT_EQ(size_t(got.nlines), std::min<size_t>(2, want.size())) << "access " << i;
    if (size_t(got.nlines) != std::min<size_t>(2, want.size())) return {};
    for (size_t p = 0; p < got.nlines; ++p) {
      EXPECT_TRUE(same(got.lines[p], want[p]))
          << "access " << i << " piece " << p << "\n  got  " << describe(got.lines[p])
          << "\n  want " << describe(want[p]);
      if (!same(got.lines[p], want[p])) return {};
    }
    if (i % 4096 == 0) {
      h->drain_all();  // (Knobs::parallel: effects still in an inbox are counted when applied)
      expect_same_counters(h->counters(), ref.counters(), cfg.geo.levels.size());
    }
  }
  h->drain_all();
  EXPECT_EQ(h->messages_dropped(), 0u);
  expect_same_counters(h->counters(), ref.counters(), cfg.geo.levels.size());
  return h->counters();
}

TEST(SimDifferential, MatchesReferenceModelOnRandomMultiCoreTraces) {
  uint64_t seed = 100;
  Counters all;
  for (const Config& cfg : configs()) {
    for (Policy p : {Policy::LRU, Policy::TreePLRU, Policy::Random}) {
      bool pow2 = true;
      for (const auto& lg : cfg.geo.levels) pow2 = pow2 && (lg.ways & (lg.ways - 1)) == 0;
      if (p == Policy::TreePLRU && !pow2) continue;
      for (bool inclusive : {true, false}) {
        for (uint32_t cores : {1u, 2u, 4u})
          for (bool parallel : {false, true}) {
            // Knobs::parallel fed one access at a time: the messages (applied at the start of
            // the receiver's next access) must give exactly what the direct protocol gives.
            Knobs k;
            k.cores = cores;
            k.policy = p;
            k.inclusive_llc = inclusive;
            k.seed = seed;
            // (seed / 2: seed moves by one per run, so seed % 2 paired each value with one
            // value of `parallel` only.)
            k.one_thread_per_core = (seed / 2) % 2;
            k.parallel = parallel;
            all += run(cfg, k, ++seed, 6000);
            if (HasFailure()) return;
          }
      }
    }
  }
  // More than 64 cores: a directory bit stands for cores 64 apart (directory.h); the trace uses
  // cores that share bits.
  for (const Config& cfg : configs())
    for (bool inclusive : {true, false}) {
      Knobs k;
      k.cores = 70;
      k.inclusive_llc = inclusive;
      k.seed = seed;
      all += run(cfg, k, ++seed, 6000, {0, 1, 64, 65, 66});
      if (HasFailure()) return;
    }
  // The traces exercise every kind and every kind of coherence and inclusion traffic.
  for (int o = 0; o < kNumOutcomes; ++o)
    EXPECT_GT(all.level[0].misses_of(Outcome(o)), 0u) << outcome_name(Outcome(o));
  EXPECT_GT(all.level[0].upgrades, 0u);
  EXPECT_GT(all.level[0].coherence_invalidations, 0u);
  EXPECT_GT(all.level[0].back_invalidations, 0u);
  EXPECT_GT(all.level[1].writebacks, 0u);
}

// The directory names exactly the cores whose last private level holds a line: after each access
// (every access for the first 400, then every 7th, to bound the time), for every line of the
// trace's region, Hierarchy::sharers equals a scan of every core's last private level
// (for_each_line), each core as bit core % 64.
TEST(SimDifferential, DirectorySharersEqualAScanOfEveryCore) {
  uint64_t seed = 900;
  size_t checked = 0, shared_lines = 0;
  for (const Config& cfg : configs()) {
    const size_t last_private = cfg.geo.levels.size() >= 2 ? cfg.geo.levels.size() - 2 : 0;
    for (Policy p : {Policy::LRU, Policy::Random})
      for (bool inclusive : {true, false})
        for (uint32_t cores : {2u, 3u, 4u, 70u}) {
          SCOPED_TRACE(std::string(cfg.name) + ", " + policy_name(p) +
                       (inclusive ? ", inclusive, " : ", non-inclusive, ") +
                       std::to_string(cores) + " cores");
          Knobs k;
          k.cores = cores;
          k.policy = p;
          k.inclusive_llc = inclusive;
          k.seed = ++seed;
          k.concurrent = false;
          k.parallel = cores <= 64 && seed % 2;  // (the parallel protocol's directory too)
          auto h = testing::make(cfg.geo, k);
          ASSERT_TRUE(h);
          const std::vector<uint32_t> pick =
              cores == 70 ? std::vector<uint32_t>{0, 1, 64, 65} : std::vector<uint32_t>{};
          std::mt19937_64 rng(seed);
          const uint64_t line = cfg.geo.levels[0].line;
          const uint64_t span = cfg.geo.levels.back().size * 3;
          const uint64_t base = 0x10000;
          std::map<uint64_t, uint64_t> want;
          struct Ctx { std::map<uint64_t, uint64_t>* want; size_t level; };
          Ctx ctx{&want, last_private};
          // The first 600 accesses come from one core (not core 0), which has the caches to
          // itself: the directory starts at the second core's first access, from its copies.
          const uint32_t solo = pick.empty() ? cores - 1 : pick.back();
          for (size_t i = 0; i < 2000; ++i) {
            const uint32_t core = i < 600 ? solo
                                  : pick.empty() ? uint32_t(rng() % cores) : pick[rng() % pick.size()];
            const uint64_t r = rng() % 4;
            const uint64_t a = r < 2 ? rng() % 512 : rng() % span;
            h->access(core, base + a, 8, rng() % 3 == 0);
            if (i >= 400 && i % 7 && i != 600) continue;
            h->drain_all();  // (the scan reads the arrays, where messages apply)
            want.clear();
            h->for_each_line(
                [](size_t level, uint32_t c, uint64_t ln, void* arg) {
                  auto* x = static_cast<Ctx*>(arg);
                  if (level == x->level && c != Hierarchy::kSharedLevel)
                    (*x->want)[ln] |= uint64_t(1) << (c % 64);
                },
                &ctx);
            for (uint64_t ln = base / line; ln <= (base + span) / line; ++ln) {
              const uint64_t got = h->sharers(ln);
              const auto it = want.find(ln);
              const uint64_t expect = it == want.end() ? 0 : it->second;
              ++checked;
              shared_lines += __builtin_popcountll(expect) > 1;
              ASSERT_EQ(got, expect) << "line " << ln << " after access " << i;
            }
          }
        }
  }
  EXPECT_GT(shared_lines, 1000u);  // lines held by several cores at once were checked
  EXPECT_GT(checked, 0u);
}

// Long single-core runs: most accesses take the L1 fast paths.
TEST(SimDifferential, MatchesReferenceModelOnLongSingleCoreTraces) {
  for (const Config& cfg : configs()) {
    Knobs k;
    k.concurrent = false;
    run(cfg, k, 7, 40000);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace whymiss::sim
