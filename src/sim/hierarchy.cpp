// The hierarchy: private levels per core, one shared level, MESI between cores, and the
// per-miss classification documented in sim.h.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <new>
#include <string>

#include "sim/cache.h"
#include "sim/departures.h"
#include "sim/directory.h"
#include "sim/fa_lru.h"
#include "sim/inbox.h"
#include "sim/line_set.h"
#include "sim/sim.h"

namespace whymiss::sim {
namespace {

constexpr uint32_t kMaxCores = 1024;
constexpr uint64_t kNone = Cache::kInvalid;
constexpr uint32_t kNoCore = ~0u;
constexpr unsigned kL3ShardBits = 10;  // at most 1024 parts of the shared level

// Knobs::parallel: a core's inbox holds at most two messages per line the directory lists it for
// (a downgrade leaves an S copy, which only an invalidation can follow; an invalidation unlists
// it), i.e. the lines of its last private level, plus slack.
uint64_t inbox_capacity(const CacheGeometry& g) {
  const size_t npriv = g.levels.size() >= 2 ? g.levels.size() - 1 : g.levels.size();
  const LevelGeometry& last = g.levels[npriv - 1];
  return 2 * (last.size / last.line) + 64;
}

// An estimate in bytes for a sentence: "930 MiB", "1.1 GiB" (binary units, 3 significant digits).
std::string approx_size(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 || v >= 100 ? "%.0f %s" : "%.3g %s", v, units[u]);
  return buf;
}

// A ticket lock: fair, so threads contending for one shard take turns access by access, as
// cores contending for a line do. (An unfair lock lets the releasing thread win again and again,
// which would serialise a contended line into long single-thread runs and hide its coherence
// misses.) Yields after a while so a preempted holder can run.
class SpinLock {
 public:
  void lock() {
    const uint32_t me = next_.fetch_add(1, std::memory_order_relaxed);
    for (unsigned spins = 0; serving_.load(std::memory_order_acquire) != me;) {
      if (++spins < 256) __builtin_ia32_pause(); else sched_yield();
    }
  }
  void unlock() { serving_.store(serving_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  // Takes the lock if it is free now (no ticket is drawn otherwise).
  bool try_lock() {
    uint32_t s = serving_.load(std::memory_order_acquire);
    return next_.compare_exchange_strong(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint32_t> next_{0};
  std::atomic<uint32_t> serving_{0};
};

// A test-and-set lock that yields after a while: for the shared level's parts and its shadow,
// which threads hold only briefly and need no turns (the stripe locks give contended lines
// theirs in lock mode; lock-free cores take no stripe lock, and contended lines are to run in the
// relay's order, docs/parallel-sim.md). Unlike a ticket lock, it lets a running thread past a
// waiter that is preempted: with more threads than host cores, FIFO hand-over convoys behind
// every descheduled waiter (`zstd -3 -T2`, five threads on two vCPUs, parallel mode: with ticket
// locks here 2 of 6 runs took 10-12 s instead of 8 s; with this lock 5 of 5 took 7.6-8.1 s).
class TasLock {
 public:
  void lock() {
    for (unsigned spins = 0;;) {
      if (!v_.load(std::memory_order_relaxed) && !v_.exchange(true, std::memory_order_acquire)) return;
      if (++spins < 128) __builtin_ia32_pause(); else sched_yield();
    }
  }
  void unlock() { v_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> v_{false};
};

template <typename L>
class Guard {
 public:
  Guard(L& l, bool on) : l_(on ? &l : nullptr) { if (l_) l_->lock(); }
  ~Guard() { if (l_) l_->unlock(); }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  L* l_;
};

struct CoreState {
  std::vector<std::unique_ptr<Cache>> priv;
  std::vector<std::unique_ptr<FaLru>> shadow;
  Cache* l1 = nullptr;        // priv[0] and shadow[0], without the unique_ptr hops
  FaLru* l1_shadow = nullptr;
  std::array<Cache*, kMaxLevels> cache_at{};   // priv[l] and shadow[l], without them either
  std::array<FaLru*, kMaxLevels> shadow_at{};
  // The lines L1 evicted, per set: a ring of 2 x ways entries (newest at victims_at[set] - 1),
  // for rivals_within(). Empty when it would exceed kMaxVictimLogBytes.
  std::vector<uint64_t> victims;
  std::vector<uint32_t> victims_at;  // per set: next slot to write (mod depth)
  uint32_t victim_depth = 0;
  void log_victim(uint32_t set, uint64_t line) {
    if (victim_depth == 0) return;
    uint32_t& at = victims_at[set];
    victims[size_t(set) * victim_depth + at] = line;
    at = at + 1 == victim_depth ? 0 : at + 1;
  }
  LineSet seen;  // lines this core ever accessed
  SpinLock lock;
  // The line of this core's previous access, its L1 slot and the hits taken on it without a
  // trip through the Cache (see HitMemo). The slot may have been invalidated or refilled since
  // (by a snoop or an inclusion eviction): users check *memo.tag == memo.line.
  HitMemo memo;
  size_t memo_idx = 0;
  // Set counting (Knobs::count_sets): the memo's hits are credited to the L1 set of its line
  // when the memo moves to another line: memo_hits_base is the memo's hit total at its last
  // move, memo_set_hits the credits per L1 set (folded). Only the core's feeder writes them.
  std::vector<uint64_t> memo_set_hits;
  uint64_t memo_hits_base = 0;
  uint64_t l1_set_mask = 0, l1_sets = 0;  // for the credit's set index (mask 0: not a power of 2)
  // The result of the access whose fill is under way (access_line), told of L1's victim.
  LineResult* filling = nullptr;
  // This core's latest L1 miss missed every private level too (a hint for prefetching).
  bool went_shared = false;
  // Knobs::parallel: other cores' effects on this core's copies, applied by its feeder.
  std::unique_ptr<Inbox> inbox;
  // Why this core lost lines (departures.h), one table per lock stripe (created on first use):
  // in lock mode another core's snoop or back-invalidation writes here under the stripe lock of
  // the line, while this core reads and writes the tables of its own lines' stripes.
  std::vector<std::unique_ptr<DepartureTable>> departures;
  DepartureTable& departures_of(size_t stripe) {
    auto& t = departures[stripe];
    if (!t) t = std::make_unique<DepartureTable>();
    return *t;
  }
  const DepartureTable* departures_in(size_t stripe) const {
    const DepartureTable* t = departures[stripe].get();
    return t && !t->empty() ? t : nullptr;
  }
  // The events this core's feeder simulated, summed by counters(): its own accesses and what
  // they did to other cores' copies (invalidations, back-invalidations, write-backs of
  // downgraded copies) and to the shared level. Only the feeder writes them, so a private hit
  // writes no host line another core writes. Its own host lines.
  alignas(64) Counters counters;
  // Knobs::count_sets: per private level, [folded set][Outcome] counts of this core's accesses.
  std::array<std::vector<uint64_t>, kMaxLevels> set_rows;
  // Where count() adds: set_rows[l]'s data for a private level, the global rows for the shared
  // level (Impl::set_rows_at), nullptr when off.
  std::array<uint64_t*, kMaxLevels> set_rows_at{};
  uint64_t memo_pending() const {
    return memo.hits[0].load(std::memory_order_relaxed) +
           memo.hits[1].load(std::memory_order_relaxed) - memo_hits_base;
  }
  size_t memo_set(uint64_t line) const {
    return size_t((l1_set_mask ? line & l1_set_mask : line % l1_sets) % kMaxCountedSets);
  }
  void set_memo(uint64_t line, size_t idx) {
    if (!memo_set_hits.empty() && memo.line != HitMemo::kNoLine) {
      const uint64_t pending = memo_pending();
      memo_set_hits[memo_set(memo.line)] += pending;
      memo_hits_base += pending;
    }
    memo.line = line;
    memo.base = line << memo.line_shift;
    memo_idx = idx;
    memo.tag = l1->tag_ptr(idx);
    memo.entry = &l1->entry(idx);
  }
};

// Lock mode's stripe of lines (line & shard_mask): the sets of every level those lines map to.
// The lock has a host cache line to itself.
struct alignas(64) Shard {
  SpinLock lock;
};

// A part of the shared level (docs/parallel-sim.md, rule 2): whole shared-level sets, chosen by
// a bijective scramble of the set index's low bits (see l3_shard), so that private arrays walked
// in step by several threads do not meet in one part. Owns those sets and, without an inclusive
// shared level, their lines' directory. Its lock is taken inside a stripe lock (lock mode), never
// with another part's, and the shared shadow's lock inside it.
struct alignas(64) L3Shard {
  TasLock lock;
  void lock_if(bool on) { if (on) lock.lock(); }
  void unlock_if(bool on) { if (on) lock.unlock(); }
  SharerTable sharers;  // the directory of this part's lines, unless it is in the shared level
};

}  // namespace

struct Hierarchy::Impl {
  CacheGeometry geo;
  Knobs knobs;         // knobs.concurrent follows set_concurrent()
  bool concurrent = true;
  size_t npriv = 0;
  bool has_shared = false;
  // The directory (directory.h): in the shared level's entries when it is inclusive, else in
  // shard tables. Kept only once a second core accesses (start_directory; with
  // Knobs::parallel from the start): until then one core holds every private copy, there is no
  // other copy to find, and its upkeep (a host cache miss per L2 eviction) would buy nothing.
  // Read without a lock (relaxed); written once, under every stripe lock in lock mode.
  std::atomic<bool> dir_on{false};
  bool dir_wanted = false;  // more than one core may ever access
  // While the directory is off: the one core that has accessed (-1: none yet).
  std::atomic<int64_t> dir_owner{-1};
  bool dir() const { return dir_on.load(std::memory_order_relaxed); }
  bool dir_in_llc = false;
  // Knobs::parallel: cross-core effects are messages (inbox.h), and the directory also says
  // whether a line's only holder has it modified (the shared-level entry's state M, or the
  // table's flag), which is what a poster needs to know instead of reading the holder's copy.
  bool parallel = false;
  // Knobs::parallel with one thread per core and at most 64 cores: no stripe lock at all. A
  // core's feeder simulates its private levels alone (other cores post to its inbox), and takes
  // the line's shared-level part lock only for work the directory orders: an L2 miss, a write
  // that needs rights it lacks (S or E), its L2 victim's release (see access_line). Above 64
  // cores a directory bit stands for several cores, and dir_leave would read another core's
  // tags: then the stripe locks stay.
  bool lockfree = false;
  unsigned line_shift = 0;
  unsigned granule_shift = 0;
  uint64_t shard_mask = 0;
  unsigned shard_bits = 0;
  std::unique_ptr<Shard[]> shards;
  // The shared level's parts: l3_fold low line bits are a function of the shared-level set (its
  // set count is a multiple of 2^l3_fold, at most 2^16 so that folded set rows stay in one part);
  // 2^l3_bits parts of 2^(l3_fold - l3_bits) sets' residues each.
  unsigned l3_fold = 0, l3_bits = 0;
  std::unique_ptr<L3Shard[]> l3_shards;
  // The scrambled residue of `line`: bijective on l3_fold bits, neighbours far apart.
  uint64_t l3_scramble(uint64_t line) const {
    const uint64_t m = (uint64_t(1) << l3_fold) - 1;
    return ((line & m) * 0x9E3779B97F4A7C15ull) & m;
  }
  L3Shard& l3_shard(uint64_t line) const {
    return l3_shards[l3_bits ? l3_scramble(line) >> (l3_fold - l3_bits) : 0];
  }
  std::unique_ptr<std::atomic<CoreState*>[]> cores;
  std::unique_ptr<uint32_t[]> created_ids;
  std::atomic<uint32_t> created{0};
  // One past the highest id of a created core: for_each_sharer looks no further. (Exact mode
  // simulates 1,024 cores and creates those its threads use; a directory bit stands for every
  // 64th core, and looking at all 16 of them cost a two-thread program 8 % of its instructions.)
  std::atomic<uint32_t> core_bound{0};
  std::mutex create_mu;
  std::unique_ptr<Cache> shared;
  std::unique_ptr<FaLru> shared_shadow;
  // Lines ever requested from the shared level (first touches: compulsory misses there). One
  // set, as per-part sets would each take a 2 KiB leaf for a few lines of a small footprint.
  LineSet shared_seen;
  TasLock shared_shadow_lock;  // the shared shadow's and shared_seen's: a leaf lock
  // Knobs::count_sets: per level, [folded set][Outcome] counts (empty when off). Only the shared
  // level's live here (under the shard lock); private levels' are per core (CoreState::set_rows).
  struct SetIndex {
    // The folded set is line & mask when the set count is a power of two (the set's mask and
    // the fold's in one), else (line % sets) % kMaxCountedSets.
    uint64_t mask = 0, sets = 1;
    uint64_t rows = 0;  // folded sets (0: count_sets off)
  };
  std::array<SetIndex, kMaxLevels> set_index{};
  std::array<std::vector<uint64_t>, kMaxLevels> set_rows;
  std::array<uint64_t*, kMaxLevels> set_rows_at{};  // set_rows[l]'s data, nullptr when empty

  ~Impl() {
    if (cores)  // (absent when create ran out of memory before making it)
      for (uint32_t i = 0; i < knobs.cores; ++i) delete cores[i].load();
  }

  uint64_t seed_for(uint32_t core, size_t level) const {
    return knobs.seed * 1000003u + core * 131u + level;
  }

  // Estimated bytes: of one core's private levels, and of everything created so far.
  uint64_t core_cost = 0;
  std::atomic<uint64_t> bytes{0};

  CoreState& core(uint32_t id) {
    CoreState* c = cores[id].load(std::memory_order_acquire);
    if (c) return *c;
    std::lock_guard<std::mutex> g(create_mu);
    c = cores[id].load(std::memory_order_relaxed);
    if (c) return *c;
    return make_core(id);
  }

  // Creates core `id`; the caller holds create_mu and checked it is absent. Throws
  // std::bad_alloc, having published nothing, when memory runs out.
  CoreState& make_core(uint32_t id) {
    auto c = std::make_unique<CoreState>();
    for (size_t l = 0; l < npriv; ++l) {
      const LevelGeometry& lg = geo.levels[l];
      c->priv.push_back(std::move(Cache::make(lg.sets(), lg.ways, knobs.policy, seed_for(id, l)).value()));
      c->shadow.push_back(std::make_unique<FaLru>(lg.size / lg.line));
    }
    c->l1 = c->priv[0].get();
    c->l1_shadow = c->shadow[0].get();
    for (size_t l = 0; l < npriv; ++l) c->cache_at[l] = c->priv[l].get(), c->shadow_at[l] = c->shadow[l].get();
    {
      const uint64_t sets = geo.levels[0].sets(), depth = 2 * uint64_t(geo.levels[0].ways);
      if (sets * depth * sizeof(uint64_t) <= kMaxVictimLogBytes) {
        c->victim_depth = uint32_t(depth);
        c->victims.assign(sets * depth, Cache::kInvalid);
        c->victims_at.assign(sets, 0);
      }
    }
    if (knobs.count_sets) {
      const uint64_t sets = geo.levels[0].sets();
      c->l1_sets = sets;
      c->l1_set_mask = (sets & (sets - 1)) == 0 ? sets - 1 : 0;
      c->memo_set_hits.assign(std::min(sets, kMaxCountedSets), 0);
      for (size_t l = 0; l < npriv; ++l)
        c->set_rows[l].assign(set_index[l].rows * kNumOutcomes, 0);
    }
    for (size_t l = 0; l < npriv; ++l)
      if (!c->set_rows[l].empty()) c->set_rows_at[l] = c->set_rows[l].data();
    if (has_shared) c->set_rows_at[npriv] = set_rows_at[npriv];
    c->departures.resize(shard_mask + 1);
    if (knobs.parallel && knobs.cores > 1) c->inbox = std::make_unique<Inbox>(inbox_capacity(geo));
    c->memo.line_shift = line_shift;
    c->memo.line_bytes = uint32_t(1) << line_shift;
    c->memo.granule_shift = granule_shift;
    CoreState* p = c.release();
    cores[id].store(p, std::memory_order_release);
    if (id + 1 > core_bound.load(std::memory_order_relaxed))  // (under create_mu)
      core_bound.store(id + 1, std::memory_order_release);
    uint32_t n = created.load(std::memory_order_relaxed);
    created_ids[n] = id;
    created.store(n + 1, std::memory_order_release);
    bytes.fetch_add(core_cost, std::memory_order_relaxed);
    return *p;
  }

  uint64_t granule_mask(uint64_t addr, uint64_t len) const {
    return sim::granule_mask(addr, len, line_shift, granule_shift);
  }

  // Counts an outcome of core `c`'s access at `level`, in c's counters and set rows (c's own
  // for its private levels; for the shared level the global rows, which c.set_rows_at points
  // at: a shard owns the same sets in every level, and folding keeps them apart as the shard
  // count divides kMaxCountedSets, so the shard lock covers them).
  void count(CoreState& c, size_t level, Outcome o, bool w, uint64_t line) {
    c.counters.level[level].by_outcome[int(o)][w]++;
    if (uint64_t* rows = c.set_rows_at[level]) rows[set_row(level, line) + int(o)]++;
  }
  // Where `line`'s set's counts start in set_rows[level] (a shared level's are a host cache
  // miss: prefetch_shared starts loading them).
  size_t set_row(size_t level, uint64_t line) const {
    const SetIndex& si = set_index[level];
    const uint64_t set = si.mask ? line & si.mask : (line % si.sets) % kMaxCountedSets;
    return size_t(set) * kNumOutcomes;
  }

  // Sets the MESI state of `line` in every private level of `c` that holds it.
  void set_state(CoreState& c, uint64_t line, Mesi s) {
    for (size_t l = 0; l < npriv; ++l) {
      int64_t i = c.priv[l]->find(line);
      if (i >= 0) c.priv[l]->entry(size_t(i)).state = s;
    }
  }

  bool shared_seen_insert(uint64_t line) {
    Guard g(shared_shadow_lock, concurrent);
    return shared_seen.insert(line);
  }

  bool shared_shadow_contains(uint64_t line) {
    Guard g(shared_shadow_lock, concurrent);
    return shared_shadow->contains(line);
  }

  Outcome classify_private(CoreState& c, uint32_t cid, size_t l, uint64_t line, uint64_t gm,
                           bool first, bool shadow_hit, LineResult& r) {
    if (first) return Outcome::Compulsory;
    if (const DepartureTable* t = c.departures_in(line & shard_mask)) {
      if (const Departure* dp = t->find(line, cid)) {
        const Departure& d = *dp;
        if (d.coherence_levels & (1u << l)) {
          r.writer_core = d.writer_core;
          r.writer_mask = d.writer_mask;
          r.tenure_mask = d.my_mask;
          return (d.writer_mask & (d.my_mask | gm)) ? Outcome::TrueSharing : Outcome::FalseSharing;
        }
        // An inclusion victim misses for the reason the evicting level lost the line.
        if (d.inclusion_levels & (1u << l)) return d.inclusion_kind;
      }
    }
    return shadow_hit ? Outcome::Conflict : Outcome::Capacity;
  }

  // ---- the directory (directory.h) ----

  // The sharers word of `line`.
  uint64_t dir_get(uint64_t line) const {
    if (!dir_in_llc) return l3_shard(line).sharers.get(line);
    const int64_t j = shared->find(line);
    return j < 0 ? 0 : shared->entry(size_t(j)).mask;
  }
  // Sets it; with dir_in_llc the line must be in the shared level (inclusion: it is while a
  // core holds it).
  void dir_set(uint64_t line, uint64_t sharers) {
    if (!dir_in_llc) return l3_shard(line).sharers.put(line, sharers);
    const int64_t j = shared->find(line);
    if (j >= 0) shared->entry(size_t(j)).mask = sharers;
  }
  // Knobs::parallel: what the line's holders have (SharerTable::state: M or E, the only holder's
  // state; S, all of them shared). A poster needs it instead of reading a holder's copy: M, to
  // write a downgraded copy back; S, to post no downgrade to copies that are S already (a line
  // that readers take and leave in turn would otherwise send its first holder a downgrade per
  // reader, unbounded while that holder's thread does not run to apply them).
  Mesi dir_state(uint64_t line) const {
    if (!dir_in_llc) return l3_shard(line).sharers.state(line);
    const int64_t j = shared->find(line);
    return j >= 0 ? shared->entry(size_t(j)).state : Mesi::E;
  }
  void dir_set_state(uint64_t line, Mesi st) {
    if (!dir_in_llc) {
      SharerTable& t = l3_shard(line).sharers;
      return t.put(line, t.get(line), st);
    }
    const int64_t j = shared->find(line);
    if (j >= 0) shared->entry(size_t(j)).state = st;
  }

  // The directory's word for the only core that has accessed while it is off (with one core in
  // all, core 0).
  uint64_t owner_bit() const {
    if (!dir_wanted) return sharer_bit(0);
    const int64_t o = dir_owner.load(std::memory_order_relaxed);
    return o < 0 ? 0 : sharer_bit(uint32_t(o));
  }
  // Every access of core `cid` comes here first, holding no simulator lock: the first core to
  // access owns the caches alone; the first access of another starts the directory.
  void note_core(uint32_t cid) {
    if (!dir_wanted || dir()) return;
    int64_t owner = dir_owner.load(std::memory_order_relaxed);
    if (owner == int64_t(cid)) return;
    if (owner < 0 && dir_owner.compare_exchange_strong(owner, int64_t(cid))) return;
    if (owner == int64_t(cid)) return;  // (a failed exchange loaded the owner)
    start_directory();
  }
  // Fills the directory from the copies in every core's last private level (only the owner's
  // can be there) and turns it on. Lock mode: under every stripe lock, taken in order, so no
  // access is under way: a feeder holds at most one stripe lock at a time (and maybe its core
  // lock, which is not taken here). The caller must hold no simulator lock (note_core runs
  // before any is taken; the spin locks are not re-entrant). Without locks the simulator has one
  // caller at a time (set_concurrent's contract). It stalls every feeder once, for a scan of the
  // last private levels' tags and a shared-level lookup per copy.
  void start_directory() {
    if (concurrent)
      for (uint64_t s = 0; s <= shard_mask; ++s) shards[s].lock.lock();
    if (!dir()) {
      const uint32_t n = created.load(std::memory_order_acquire);
      for (uint32_t q = 0; q < n; ++q) {
        const uint32_t id = created_ids[q];
        const Cache& last = *cores[id].load(std::memory_order_acquire)->cache_at[npriv - 1];
        const size_t slots = size_t(last.sets()) * last.ways();
        for (size_t i = 0; i < slots; ++i) {
          const uint64_t v = last.tag(i);
          if (v == kNone) continue;
          if (dir_in_llc) {
            const int64_t j = shared->find(v);  // (present: inclusion)
            if (j >= 0) shared->entry(size_t(j)).mask |= sharer_bit(id);
          } else {
            SharerTable& t = l3_shard(v).sharers;
            t.put(v, t.get(v) | sharer_bit(id));
          }
        }
      }
      dir_on.store(true, std::memory_order_release);
    }
    if (concurrent)
      for (uint64_t s = shard_mask + 1; s-- > 0;) shards[s].lock.unlock();
  }

  // ---- Knobs::parallel: messages ----

  void post(CoreState& o, const Message& m) { o.inbox->post(m, o.memo.pending); }

  // Core `oid` (the caller feeds it) applies its inbox: what the direct protocol (snoop,
  // evict_shared) would have done to its copies when the message was posted, counted in its
  // own counters. A message for a line it no longer holds (or never did: an aliased directory
  // bit) changes nothing.
  void drain(CoreState& o, uint32_t oid) {
    if (o.memo.pending.load(std::memory_order_acquire) == 0) return;
    o.inbox->drain(o.memo.pending, [&](const Message& m) { apply(o, oid, m); });
  }
  // drain(), through every message reserved so far (Inbox::drain_through): for a lock-free core
  // holding a line's part lock, so that every message about that line is applied.
  void drain_through(CoreState& o, uint32_t oid) {
    if (!o.inbox->any()) return;
    o.inbox->drain_through(o.memo.pending, [&](const Message& m) { apply(o, oid, m); });
  }
  void apply(CoreState& o, uint32_t oid, const Message& m) {
    {
      const uint64_t line = m.line;
      if (o.priv[npriv - 1]->find(line) < 0) return;
      Departure d;
      for (size_t l = 0; l < npriv; ++l) {
        const int64_t x = o.priv[l]->find(line);
        if (x < 0) continue;
        Entry& e = o.priv[l]->entry(size_t(x));
        switch (m.kind) {
          case Message::Invalidate:
            d.my_mask |= e.mask;
            d.coherence_levels |= uint8_t(1u << l);
            o.priv[l]->invalidate(size_t(x));
            o.counters.level[l].coherence_invalidations++;
            break;
          case Message::Downgrade:
            if (e.dirty) {  // (the poster marked the shared level's copy dirty)
              e.dirty = false;
              o.counters.level[l].writebacks++;
            }
            e.state = Mesi::S;
            break;
          case Message::BackInvalidate:
            o.priv[l]->invalidate(size_t(x));
            o.counters.level[l].back_invalidations++;
            d.inclusion_levels |= uint8_t(1u << l);
            break;
        }
      }
      if (m.kind == Message::Invalidate) {
        d.writer_mask = m.writer_mask;
        d.writer_core = m.writer_core;
        o.departures_of(line & shard_mask).set(line, oid, d);
      } else if (m.kind == Message::BackInvalidate) {
        d.inclusion_kind = Outcome(m.inclusion_kind);
        o.departures_of(line & shard_mask).set(line, oid, d);
      }
    }
  }

  // snoop's work as messages: an invalidation to every other holder of a write, a downgrade to
  // the only other holder of a read (several holders are all S already). A downgraded modified
  // copy is written back to the shared level here, under the caller's lock; the holder counts
  // its private levels' write-backs when it applies the message.
  bool post_snoop(uint32_t cid, uint64_t sharers, Mesi state, uint64_t line, uint64_t gm,
                  bool w, LineResult& r) {
    bool others = false;
    const bool modified = state == Mesi::M;
    const bool one = state != Mesi::S &&
                     (__builtin_popcountll(sharers & ~sharer_bit(cid)) == 1 ||
                      sharers == sharer_bit(cid));  // (cid's bit: another core of its residue)
    for_each_sharer(sharers, cid, [&](uint32_t, CoreState& o) {
      others = true;
      Message m;
      m.line = line;
      if (w) {
        m.kind = Message::Invalidate;
        m.writer_mask = gm;
        m.writer_core = cid;
        post(o, m);
        if (r.invalidated < UINT16_MAX) r.invalidated++;
      } else if (one) {
        m.kind = Message::Downgrade;
        post(o, m);
      }
    });
    if (!w && modified) write_back_to_shared(line);
    return others;
  }

  // Calls fn(id, core) for every created core other than `except` that the sharers word names
  // (the cores of each set bit's residue, see directory.h), in core order. fn checks the copy.
  template <typename F>
  // A core made after `bound` was read has no copy yet: copies come from its own accesses, after.
  void for_each_sharer(uint64_t sharers, uint32_t except, F&& fn) {
    const uint32_t bound = core_bound.load(std::memory_order_acquire);
    for (uint64_t b = sharers; b; b &= b - 1)
      for (uint32_t q = uint32_t(__builtin_ctzll(b)); q < bound; q += 64) {
        if (q == except) continue;
        if (CoreState* o = cores[q].load(std::memory_order_acquire)) fn(q, *o);
      }
  }
  // Core `cid`'s last private level dropped `line`; `llc_hint` is its index in the shared level
  // when the directory is there (Entry::below of the last private level), checked before use.
  // Lock mode: the caller holds `line`'s stripe (which covers its shared-level set); a table
  // directory also needs the part's lock, taken here.
  // Lock-free mode (`lockfree`): the caller holds the part's lock (`part_held`), as the
  // shared-level entry is no stripe's any more, and the hint is checked: the shared level may
  // have evicted the line since (its back-invalidation still in this core's inbox) and reused
  // the slot.
  void dir_leave(uint32_t cid, uint64_t line, uint32_t llc_hint, bool part_held = false) {
    if (!dir()) return;
    Guard g(l3_shard(line).lock, concurrent && !dir_in_llc && !part_held);
    if (lockfree && dir_in_llc && shared->tag(llc_hint) != line) return;
    uint64_t* word;
    uint64_t tmp;
    Entry* llc_entry = nullptr;
    if (dir_in_llc) {
      // The hint is exact: the last private level's fills take it from the shared level's
      // index of the line, and inclusion keeps the line there, in place, while a core holds it.
      // (Checking its tag would be a second host cache miss per L2 eviction; the directory
      // property test in sim_differential_test fails if the hint were ever wrong.)
      llc_entry = &shared->entry(llc_hint);
      word = &llc_entry->mask;
    } else {
      tmp = l3_shard(line).sharers.get(line);
      word = &tmp;
    }
    uint64_t keep = 0;  // another core of cid's residue that still holds the line keeps the bit
    if (knobs.cores > 64 && (*word & sharer_bit(cid)))
      for_each_sharer(sharer_bit(cid), cid, [&](uint32_t, CoreState& o) {
        if (o.priv[npriv - 1]->find(line) >= 0) keep = sharer_bit(cid);
      });
    *word = (*word & ~sharer_bit(cid)) | keep;
    if (!dir_in_llc) l3_shard(line).sharers.put(line, *word, l3_shard(line).sharers.state(line));
    else if (parallel && *word == 0) llc_entry->state = Mesi::E;
  }

  void write_back_to_shared(uint64_t line) {
    if (!has_shared) return;
    int64_t j = shared->find(line);
    if (j >= 0) shared->entry(size_t(j)).dirty = true;
  }

  // Removes the line at `idx` of private level `l` of core `c` to make room: everything but the
  // slot itself, which the caller (fill_private) overwrites right after. `set`: idx's set.
  void evict_private(CoreState& c, uint32_t cid, size_t l, size_t idx, uint32_t set) {
    Cache& cl = *c.cache_at[l];
    const uint64_t v = cl.tag(idx);
    const Entry e = cl.entry(idx);
    if (l == 0) {
      c.log_victim(set, v);
      if (c.filling) c.filling->l1_victim = v, c.filling->l1_victim_mask = e.mask;
    }
    if (l + 1 == npriv) {
      // Leaving the core: closer levels must drop it too (private levels are inclusive).
      bool dirty = e.dirty;
      Departure d;
      for (size_t u = 0; u < l; ++u) {
        int64_t j = c.priv[u]->find(v);
        if (j < 0) continue;
        dirty |= c.priv[u]->entry(size_t(j)).dirty;
        if (u == 0) c.log_victim(c.priv[0]->set_of(v), v);  // a departure from its L1 set too
        c.priv[u]->invalidate(size_t(j));
        c.counters.level[u].back_invalidations++;
        d.inclusion_levels |= uint8_t(1u << u);
      }
      if (d.inclusion_levels) {
        d.inclusion_kind = c.shadow[l]->contains(v) ? Outcome::Conflict : Outcome::Capacity;
        c.departures_of(v & shard_mask).set(v, cid, d);
      }
      // (Lock-free: the victim's part lock, for its shared-level entry; the filled line's is
      // no longer held, see access_line.)
      Guard g(l3_shard(v).lock, concurrent && lockfree);
      if (dirty) {
        c.counters.level[l].writebacks++;
        write_back_to_shared(v);
      }
      dir_leave(cid, v, e.below, concurrent && lockfree);
    } else {
      // The next level holds the line where `below` says unless it evicted it since; then it
      // cannot have refilled it elsewhere (it refills only on a miss here), so there is nothing
      // to merge into. Same outcome as a lookup, without reading the set's fingerprints.
      Cache& next = *c.cache_at[l + 1];
      if (next.tag(e.below) == v) {
        Entry& n = next.entry(e.below);
        n.mask |= e.mask;
        n.dirty |= e.dirty;
      } else if (e.dirty && parallel) {
        // The modification left with this copy (three or more private levels: a middle level
        // may have dropped the line). If no farther copy is dirty, the directory must no longer
        // say modified, or a reader's downgrade would write back what is not there.
        bool dirty = false;
        for (size_t u = l + 2; u < npriv && !dirty; ++u) {
          const int64_t j = c.priv[u]->find(v);
          dirty = j >= 0 && c.priv[u]->entry(size_t(j)).dirty;
        }
        if (!dirty) {
          // (Only while the directory still says this core holds it modified alone: another
          // core may have taken the line since, its message still in this core's inbox.)
          Guard g(l3_shard(v).lock, concurrent);
          if (dir_get(v) == sharer_bit(cid) && dir_state(v) == Mesi::M) dir_set_state(v, Mesi::E);
        }
      }
      if (e.dirty) c.counters.level[l].writebacks++;
    }
  }

  // `below`: the line's index in level l + 1 (for the last private level: in the shared level
  // when the directory is there, see dir_leave).
  size_t fill_private(CoreState& c, uint32_t cid, size_t l, uint64_t line, Mesi st,
                      size_t below) {
    Cache& cl = *c.cache_at[l];
    const uint32_t set = cl.set_of(line);
    const size_t i = cl.fill_slot(set);
    if (cl.tag(i) != kNone) evict_private(c, cid, l, i, set);
    cl.fill(i, set, line, Entry{0, st, false, uint32_t(below)});
    return i;
  }

  // Other cores' copies on a request by `cid`, found through the directory word `sharers`. A
  // write invalidates them (and remembers why); a read downgrades M/E copies to S. Returns
  // whether another core still holds the line. The caller updates the directory. Counted in the
  // requesting core `me`'s counters (see CoreState::counters).
  bool snoop(CoreState& me, uint32_t cid, uint64_t sharers, uint64_t line, uint64_t gm, bool w,
             LineResult& r) {
    bool others = false;
    for_each_sharer(sharers, cid, [&](uint32_t oid, CoreState& o) {
      if (o.priv[npriv - 1]->find(line) < 0) return;  // inclusion: absent everywhere
      if (w) {
        Departure d;
        d.writer_mask = gm;
        d.writer_core = cid;
        bool dirty = false;
        for (size_t l = 0; l < npriv; ++l) {
          int64_t x = o.priv[l]->find(line);
          if (x < 0) continue;
          d.my_mask |= o.priv[l]->entry(size_t(x)).mask;
          dirty |= o.priv[l]->entry(size_t(x)).dirty;
          d.coherence_levels |= uint8_t(1u << l);
          o.priv[l]->invalidate(size_t(x));
          me.counters.level[l].coherence_invalidations++;
        }
        (void)dirty;  // the modified data moves to the writer, which now holds the line dirty
        o.departures_of(line & shard_mask).set(line, oid, d);
        if (r.invalidated < UINT16_MAX) r.invalidated++;
      } else {
        others = true;
        for (size_t l = 0; l < npriv; ++l) {
          int64_t x = o.priv[l]->find(line);
          if (x < 0) continue;
          Entry& e = o.priv[l]->entry(size_t(x));
          if (e.dirty) {
            e.dirty = false;
            me.counters.level[l].writebacks++;
            write_back_to_shared(line);
          }
          e.state = Mesi::S;
        }
      }
    });
    return others;
  }

  void evict_shared(CoreState& me, uint32_t cid, size_t idx) {
    uint64_t v = shared->tag(idx);
    bool dirty = shared->entry(idx).dirty;
    // (Knobs::parallel: another holder's modified copy, which it will drop unseen.)
    if (parallel && dir_in_llc && shared->entry(idx).state == Mesi::M) dirty = true;
    // (Without a directory, the only core that accessed.)
    const uint64_t sharers = !dir() ? owner_bit() : dir_in_llc ? shared->entry(idx).mask : 0;
    shared->invalidate(idx);
    if (knobs.inclusive_llc) {
      // Why the line left (a conflict if the shared shadow still holds it) matters only to a
      // core that loses a copy: asked then, at most once. Most victims of a big shared level
      // are in no private level, and the question is a host cache miss or two in its shadow.
      int why = -1;
      for_each_sharer(sharers, kNoCore, [&](uint32_t oid, CoreState& o) {
        if (parallel && oid != cid) {  // a message; the requester's own copy goes now
          if (why < 0) why = int(shared_shadow_contains(v) ? Outcome::Conflict : Outcome::Capacity);
          Message m;
          m.line = v;
          m.kind = Message::BackInvalidate;
          m.inclusion_kind = uint8_t(why);
          return post(o, m);
        }
        if (o.priv[npriv - 1]->find(v) < 0) return;  // inclusion: absent everywhere
        Departure d;
        for (size_t l = 0; l < npriv; ++l) {
          int64_t x = o.priv[l]->find(v);
          if (x < 0) continue;
          dirty |= o.priv[l]->entry(size_t(x)).dirty;
          o.priv[l]->invalidate(size_t(x));
          me.counters.level[l].back_invalidations++;
          d.inclusion_levels |= uint8_t(1u << l);
        }
        if (d.inclusion_levels) {
          if (why < 0) why = int(shared_shadow_contains(v) ? Outcome::Conflict : Outcome::Capacity);
          d.inclusion_kind = Outcome(why);
          o.departures_of(v & shard_mask).set(v, oid, d);
        }
      });
    }
    if (dirty) me.counters.level[npriv].writebacks++;
  }

  // Starts loading what access_shared will look at (see access_line).
  void prefetch_shared(uint64_t line) {
    shared->prefetch(line);
    shared->prefetch_entries(line);
    // Its table may be reallocated under the shadow's lock by another thread: not then (found
    // by a -fsanitize=thread build of the coherence tests).
    if (!concurrent) shared_shadow->prefetch(line);
    if (!set_rows[npriv].empty()) __builtin_prefetch(&set_rows[npriv][set_row(npriv, line)]);
  }

  // core_first: the requesting core never accessed the line before. If it did, it asked the
  // shared level for it then (every first access misses the private levels), so the line is in
  // shared_seen already and the set need not be asked.
  // Returns the line's index in the shared level (it is there afterwards).
  size_t access_shared(CoreState& c, uint32_t cid, uint64_t line, bool w, bool core_first,
                       LineResult& r) {
    const size_t s = npriv;
    if (core_first && !concurrent) shared_seen.prefetch_lookup(line);  // (reads its table)
    bool shadow_hit;
    {
      Guard g(shared_shadow_lock, concurrent);
      shadow_hit = shared_shadow->access(line);
    }
    int64_t j = shared->find(line);
    if (j >= 0) {
      shared->touch(size_t(j));
      r.level[s] = Outcome::Hit;
      r.levels_reached = uint8_t(s + 1);
      count(c, s, Outcome::Hit, w, line);
      return size_t(j);
    }
    Outcome o = core_first && shared_seen_insert(line) ? Outcome::Compulsory
                : shadow_hit                ? Outcome::Conflict
                                            : Outcome::Capacity;
    r.level[s] = o;
    r.levels_reached = uint8_t(s + 2);
    count(c, s, o, w, line);
    const uint32_t set = shared->set_of(line);
    const size_t i = shared->fill_slot(set);
    if (shared->tag(i) != kNone) evict_shared(c, cid, i);
    shared->fill(i, set, line, Entry{0, Mesi::E, false});
    return i;
  }

  // An L1 hit that needs nothing beyond this core's L1 and its shadow: the line is in L1 and
  // the access is a read or a write to a line held M. Updates exactly what access_line would
  // (L1 shadow, L1 recency, the entry's mask and dirty bit, the memo) and counts the hit in the
  // core's own counters. Returns false, having changed nothing, otherwise. The caller holds the
  // locks access_line would need (none when not concurrent).
  // When it returns false, *found is the line's L1 index or -1 (access_line need not look again).
  bool l1_hit(CoreState& c, uint64_t line, uint64_t gm, bool w, int64_t* found) {
    Cache& l1 = *c.l1;
    size_t idx = c.memo_idx;
    if (c.memo.line != line || l1.tag(idx) != line) {
      int64_t i = l1.find(line);
      *found = i;
      if (i < 0) return false;
      idx = size_t(i);
      if (w && l1.entry(idx).state != Mesi::M) return false;
      // Not the previous line: it becomes most recent in the shadow and in its set. (For the
      // memo line both are already true, so access_line skips them too.)
      c.l1_shadow->access(line);
      l1.touch(idx);
      c.set_memo(line, idx);
    } else if (w && l1.entry(idx).state != Mesi::M) {
      *found = int64_t(idx);
      return false;
    }
    Entry& e = l1.entry(idx);
    e.mask |= gm;
    e.dirty |= w;
    c.memo.bump(w);
    return true;
  }

  // A one-line access that l1_hit turned down, when not concurrent: access_general's work
  // without its loop, locks and whole-result zeroing (only the fields access_line does not
  // always set are cleared; lines[1] is left as it was, nlines says it is not part of the result).
  __attribute__((noinline)) bool miss_one_line(CoreState& c, uint32_t cid, uint64_t line,
                                               uint64_t gm, bool w, int64_t l1_found,
                                               AccessResult& res) {
    c.counters.accesses++;
    res.nlines = 1;
    LineResult& r = res.lines[0];
    r.level = {};
    r.upgrade = 0;
    r.invalidated = 0;
    r.writer_core = 0;
    r.writer_mask = 0;
    r.tenure_mask = 0;
    access_line(c, cid, line, gm, w, r, l1_found);
    return false;
  }

  bool access_general(uint32_t core, uint64_t addr, uint32_t size, bool write, AccessResult& res);

  // l1_found: the line's L1 index or -1, when the caller already asked (l1_hit said no, so the
  // memo cannot apply either); kUnknown otherwise.
  static constexpr int64_t kUnknown = -2;
  __attribute__((noinline)) void access_line(CoreState& c, uint32_t cid, uint64_t line,
                                             uint64_t gm, bool w, LineResult& r,
                                             int64_t l1_found = kUnknown) {
    r.line = line;
    r.access_mask = gm;
    r.l1_victim_mask = 0;
    c.counters.line_accesses++;
    Cache& l1 = *c.l1;
    // Same line as this core's previous access and still held with enough rights: nothing in
    // any replacement state or shadow can change (the line is already most recent everywhere).
    if (l1_found == kUnknown && c.memo.line == line && l1.tag(c.memo_idx) == line) {
      Entry& e = l1.entry(c.memo_idx);
      if (!w || e.state == Mesi::M) {
        e.mask |= gm;
        e.dirty |= w;
        count(c, 0, Outcome::Hit, w, line);
        r.level[0] = Outcome::Hit;
        r.levels_reached = 1;
        return;
      }
    }

    // First every level's lookups (shadow and tags), then the classification of the levels
    // that missed: the host cache misses of the bigger levels' lookups and of the first-touch
    // set overlap instead of each waiting for the one before.
    size_t hit_level = npriv;
    int64_t hit_idx = -1;
    uint32_t shadow_hits = 0;  // bit l: level l's shadow held the line
    for (size_t l = 0; l < npriv; ++l) {
      if (c.shadow_at[l]->access(line)) shadow_hits |= 1u << l;
      hit_idx = l == 0 && l1_found != kUnknown ? l1_found : c.cache_at[l]->find(line);
      if (hit_idx >= 0) {
        hit_level = l;
        break;
      }
      if (l == 0) {
        // An L1 miss usually goes further: start loading what the next levels will look at
        // (their tags and shadow slots are host cache misses for big levels), and the
        // first-touch set's word when it will be asked (below). When this core's previous L1
        // miss went past its private levels, this one probably will too: the shared level's
        // loads start now as well (when it did not, they wait until the private levels missed,
        // since most L1 misses hit a private level and these are big arrays).
        for (size_t u = 1; u < npriv; ++u) c.cache_at[u]->prefetch(line), c.shadow_at[u]->prefetch(line);
        if (!(shadow_hits & 1)) c.seen.prefetch_lookup(line);
        if (c.went_shared && has_shared) prefetch_shared(line);
      } else if (l + 1 == npriv && has_shared && !c.went_shared) {
        prefetch_shared(line);
      }
    }
    // Lock-free: a write to a copy held S or E needs the directory (an upgrade, or the mark
    // that this core modified it). Under the line's part lock, this core's inbox may hold an
    // invalidation or a downgrade of that copy, posted after the lookups above by a core that
    // now owns the line: applied first (every message reserved so far, drain_through: one about
    // this line may wait behind another line's poster that has not published yet), and the
    // lookups redone below the level that hit
    // (messages only take copies away or downgrade them), so the write is ordered after it. The
    // lock is held into the upgrade or the miss below, which release it.
    bool held = false;
    if (lockfree && concurrent && w && hit_level < npriv &&
        c.cache_at[hit_level]->entry(size_t(hit_idx)).state != Mesi::M) {
      l3_shard(line).lock.lock();
      held = true;
      if (c.inbox->any()) {
        drain_through(c, cid);
        size_t l = hit_level;
        for (; l < npriv; ++l) {
          if (l > hit_level && c.shadow_at[l]->access(line)) shadow_hits |= 1u << l;
          hit_idx = c.cache_at[l]->find(line);
          if (hit_idx >= 0) break;
        }
        hit_level = l;
      }
    }
    // A line the L1 shadow still holds was accessed by this core before (its first access
    // missed and went through here): no need to ask the first-touch set.
    const bool first = hit_level > 0 && !(shadow_hits & 1) && c.seen.insert(line);
    for (size_t l = 0; l < hit_level; ++l) {
      const Outcome o = classify_private(c, cid, l, line, gm, first, (shadow_hits >> l) & 1, r);
      r.level[l] = o;
      count(c, l, o, w, line);
    }
    if (hit_level < npriv) {
      r.level[hit_level] = Outcome::Hit;
      count(c, hit_level, Outcome::Hit, w, line);
    }
    if (hit_level > 0) c.went_shared = hit_level == npriv;

    size_t l1_idx;
    if (hit_level < npriv) {
      Cache& hc = *c.cache_at[hit_level];
      hc.touch(size_t(hit_idx));
      Mesi st = hc.entry(size_t(hit_idx)).state;
      r.levels_reached = uint8_t(hit_level + 1);
      if (w && st == Mesi::S) {  // upgrade: the write needs the only copy
        Guard g(l3_shard(line).lock, concurrent && !held);
        if (parallel) post_snoop(cid, dir_get(line), Mesi::S, line, gm, true, r);
        else snoop(c, cid, dir_get(line), line, gm, true, r);
        if (dir()) dir_set(line, sharer_bit(cid));  // (off: no S copy can exist, but keep no word)
        if (parallel) dir_set_state(line, Mesi::M);
        r.upgrade = 1;
        c.counters.level[hit_level].upgrades++;
      } else if (w && st == Mesi::E && parallel) {  // once a tenure: a reader must find it dirty
        Guard g(l3_shard(line).lock, concurrent && !held);
        dir_set_state(line, Mesi::M);
      }
      if (held) l3_shard(line).lock.unlock();  // (before the fills: their victims' parts)
      if (w && st != Mesi::M) {
        st = Mesi::M;
        set_state(c, line, st);
      }
      l1_idx = size_t(hit_idx);
      c.filling = &r;
      for (size_t l = hit_level; l-- > 0;) l1_idx = fill_private(c, cid, l, line, st, l1_idx);
      c.filling = nullptr;
    } else {
      // The other copies, through the directory. With an inclusive shared level the line is
      // there if any core holds it: the shared level's lookup comes first and gives the word
      // (its eviction of another line commutes with this line's snoop). Otherwise the snoop
      // comes first, as a downgraded dirty copy must not mark a line the shared level is about
      // to fill.
      bool others = false;
      uint64_t sharers;
      size_t below = 0;
      L3Shard& part = l3_shard(line);
      part.lock_if(concurrent && !held);
      // (Lock-free: what was posted before the lock, so that no message about an earlier copy
      // of this line is still to come once the line is filled below.)
      if (lockfree && concurrent && !held) drain_through(c, cid);
      if (dir_in_llc) {
        below = access_shared(c, cid, line, w, first, r);
        sharers = dir() ? shared->entry(below).mask : 0;
        if (sharers & ~sharer_bit(cid) || (sharers && knobs.cores > 64))
          others = parallel ? post_snoop(cid, sharers, shared->entry(below).state, line,
                                         gm, w, r)
                            : snoop(c, cid, sharers, line, gm, w, r);
        if (parallel) shared->entry(below).state = w ? Mesi::M : others ? Mesi::S : Mesi::E;
      } else {
        sharers = dir() ? part.sharers.get(line) : 0;
        if (sharers)
          others = parallel ? post_snoop(cid, sharers, part.sharers.state(line), line, gm, w, r)
                            : snoop(c, cid, sharers, line, gm, w, r);
        if (has_shared) access_shared(c, cid, line, w, first, r);
        else r.levels_reached = uint8_t(npriv + 1);
      }
      const uint64_t after = w ? sharer_bit(cid) : sharers | sharer_bit(cid);
      // A table directory names this core now, before the part's lock goes: the fills below
      // may evict a victim, whose part's lock dir_leave takes (never two at once).
      if (dir() && !dir_in_llc)
        part.sharers.put(line, after, !parallel ? Mesi::E : w ? Mesi::M : others ? Mesi::S : Mesi::E);
      // Lock-free: the inclusive shared level's word too, as no stripe lock covers its set (an
      // eviction of the line by another core right after must find this core listed).
      if (dir() && dir_in_llc && lockfree) shared->entry(below).mask = after;
      part.unlock_if(concurrent);
      Mesi st = w ? Mesi::M : (others ? Mesi::S : Mesi::E);
      l1_idx = below;
      c.filling = &r;
      for (size_t l = npriv; l-- > 0;) l1_idx = fill_private(c, cid, l, line, st, l1_idx);
      c.filling = nullptr;
      // (After the fills, though the part's lock is gone: the shared-level entry is its set's,
      // which the stripe lock covers in lock mode. Written before them, the store slowed the
      // victim's dir_leave down by a quarter of a sequential miss stream's time in bench_sim.)
      if (dir() && dir_in_llc && !lockfree) shared->entry(below).mask = after;
      if (c.departures[line & shard_mask]) c.departures[line & shard_mask]->erase(line, cid);
    }
    Entry& e = l1.entry(l1_idx);
    e.mask |= gm;
    e.dirty |= w;
    c.set_memo(line, l1_idx);
  }
};

Hierarchy::Hierarchy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Hierarchy::~Hierarchy() = default;

Result<std::unique_ptr<Hierarchy>> Hierarchy::create(const CacheGeometry& g, const Knobs& k) {
  if (auto st = validate(g); !st) return Error{st.error()};
  if (k.cores == 0 || k.cores > kMaxCores)
    return make_error("the number of simulated cores must be between 1 and " +
                      std::to_string(kMaxCores) + ", not " + std::to_string(k.cores));
  if (k.max_shards == 0 || (k.max_shards & (k.max_shards - 1)))
    return make_error("the shard count must be a power of two");
  for (const auto& lg : g.levels) {
    if (lg.size > kMaxLevelBytes)
      return make_error(lg.name + " is " + format_size(lg.size) + ", larger than the " +
                        format_size(kMaxLevelBytes) + " the simulator models");
    auto r = Replacement::make(k.policy, 1, lg.ways, 0);
    if (!r) return Error{lg.name + ": " + r.error()};
  }
  // One core and the shared level must fit, or nothing can be simulated at all.
  const bool table_directory = k.cores > 1 && !(g.levels.size() >= 2 && k.inclusive_llc);
  uint64_t core_cost = core_bytes(g, k.policy) + (table_directory ? directory_bytes(g) : 0);
  if (k.parallel && k.cores > 1) core_cost += 64 * inbox_capacity(g);  // 32-byte slots, rounded up
  const uint64_t shared_cost = g.levels.size() >= 2 ? level_bytes(g.levels.back(), k.policy) : 0;
  if (k.memory_budget && core_cost + shared_cost > k.memory_budget)
    return make_error("simulating " + g.to_spec() + " takes " +
                      approx_size(core_cost + shared_cost) + " for the first core" +
                      (shared_cost ? " and the shared level" : "") + ", but only " +
                      approx_size(k.memory_budget) + " of memory is available; use smaller levels");
  try {
    return create_unchecked(g, k, core_cost, shared_cost);
  } catch (const std::bad_alloc&) {
    return make_error("cannot allocate the " + approx_size(shared_cost + core_cost) +
                      " that simulating " + g.to_spec() + " takes; use smaller levels");
  }
}

Result<std::unique_ptr<Hierarchy>> Hierarchy::create_unchecked(const CacheGeometry& g,
                                                               const Knobs& k, uint64_t core_cost,
                                                               uint64_t shared_cost) {
  auto m = std::make_unique<Impl>();
  m->core_cost = core_cost;
  m->bytes = shared_cost;
  m->geo = g;
  m->knobs = k;
  m->concurrent = k.concurrent;
  size_t n = g.levels.size();
  m->has_shared = n >= 2;
  m->dir_wanted = k.cores > 1;
  m->parallel = k.parallel && m->dir_wanted;
  m->lockfree = m->parallel && k.one_thread_per_core && k.cores <= 64;
  m->dir_on.store(m->parallel, std::memory_order_relaxed);
  m->dir_in_llc = m->has_shared && k.inclusive_llc;
  m->npriv = m->has_shared ? n - 1 : n;
  while ((1u << m->line_shift) < g.line()) ++m->line_shift;
  m->granule_shift = m->line_shift > 6 ? m->line_shift - 6 : 0;
  uint64_t nshards = k.max_shards;
  // A shard owns the same sets in every level: its count must divide every level's set count
  // (the largest power of two that does, for counts that are not powers of two).
  for (const auto& lg : g.levels) nshards = std::min<uint64_t>(nshards, lg.sets() & -lg.sets());
  m->shard_mask = nshards - 1;
  while ((uint64_t(1) << m->shard_bits) < nshards) ++m->shard_bits;
  m->shards.reset(new Shard[nshards]);
  {
    // The shared level's parts (the last private level's sets without one: its table directory).
    const uint64_t sets = g.levels.back().sets();
    const uint64_t pow2 = sets & -sets;
    while (m->l3_fold < 16 && (uint64_t(2) << m->l3_fold) <= pow2) ++m->l3_fold;
    m->l3_bits = std::min(m->l3_fold, kL3ShardBits);
    m->l3_shards.reset(new L3Shard[size_t(1) << m->l3_bits]);
  }
  if (k.count_sets)
    for (size_t l = 0; l < n; ++l) {
      const uint64_t sets = g.levels[l].sets();
      m->set_index[l].sets = sets;
      const uint64_t folded = std::min(sets, kMaxCountedSets);  // both powers of two, if sets is
      m->set_index[l].mask = (sets & (sets - 1)) == 0 ? folded - 1 : 0;
      m->set_index[l].rows = folded;
      if (l >= m->npriv) {  // private levels' rows are per core (make_core)
        m->set_rows[l].assign(folded * kNumOutcomes, 0);
        m->set_rows_at[l] = m->set_rows[l].data();
      }
    }
  m->cores.reset(new std::atomic<CoreState*>[k.cores]);
  for (uint32_t i = 0; i < k.cores; ++i) m->cores[i].store(nullptr);
  m->created_ids.reset(new uint32_t[k.cores]);
  if (m->has_shared) {
    const LevelGeometry& lg = g.levels.back();
    m->shared = std::move(Cache::make(lg.sets(), lg.ways, k.policy, k.seed * 7919u).value());
    m->shared_shadow = std::make_unique<FaLru>(lg.size / lg.line);
  }
  return std::unique_ptr<Hierarchy>(new Hierarchy(std::move(m)));
}

AccessResult Hierarchy::access(uint32_t core, uint64_t addr, uint32_t size, bool write) {
  AccessResult res;
  if (access(core, addr, size, write, res)) {
    res.nlines = 1;
    res.lines[0].line = addr >> impl_->line_shift;
    res.lines[0].level[0] = Outcome::Hit;
    res.lines[0].levels_reached = 1;
    res.lines[0].access_mask = impl_->granule_mask(addr, size ? size : 1);
  }
  return res;
}

bool Hierarchy::access(uint32_t core, uint64_t addr, uint32_t size, bool write,
                       AccessResult& res) {
  // The hottest paths of exact mode, kept out of the big function (few registers to save, no
  // result), when not concurrent: a one-line access to the line this core touched last, still in
  // its L1 slot with enough rights (the same updates as access_line's memo path), then any other
  // one-line L1 hit (l1_hit).
  Impl& m = *impl_;
  if ((!m.concurrent || m.lockfree) && core < m.knobs.cores && size != 0) {
    const uint64_t line = addr >> m.line_shift;
    CoreState* c = m.cores[core].load(std::memory_order_acquire);
    if (c && ((addr + size - 1) >> m.line_shift) == line) {
      if (c->memo.try_hit(addr, size, write)) return true;
      if (m.parallel) m.drain(*c, core);
      const uint64_t gm = m.granule_mask(addr, size);
      int64_t l1_found;
      if (m.l1_hit(*c, line, gm, write, &l1_found)) return true;
      m.note_core(core);  // (an L1 hit needs no directory; a core made by hit_memo() may miss)
      return m.miss_one_line(*c, core, line, gm, write, l1_found, res);
    }
  }
  return m.access_general(core, addr, size, write, res);
}

// Everything but the memo hit of Hierarchy::access (out of line, so that path stays small).
__attribute__((noinline)) bool Hierarchy::Impl::access_general(uint32_t core, uint64_t addr,
                                                               uint32_t size, bool write,
                                                               AccessResult& res) {
  Impl& m = *this;
  if (size == 0) size = 1;
  if (core >= m.knobs.cores) core %= m.knobs.cores;
  m.note_core(core);
  CoreState& c = m.core(core);
  // (The inbox has one consumer: with threads folded onto cores, only under the core lock, in
  // the loop below.)
  if (m.parallel && (!m.concurrent || m.knobs.one_thread_per_core)) m.drain(c, core);
  int64_t ignored;  // l1_hit's L1 index: access_line looks again here
  const uint64_t first = addr >> m.line_shift;
  const uint64_t last = (addr + size - 1) >> m.line_shift;
  // The common case first: one line, an L1 hit. No lock when not concurrent, no result.
  if (first == last && (!m.concurrent || m.lockfree) &&
      m.l1_hit(c, first, m.granule_mask(addr, size), write, &ignored))
    return true;
  Guard cg(c.lock, m.concurrent && !m.knobs.one_thread_per_core);
  const uint64_t line_bytes = uint64_t(1) << m.line_shift;
  LineResult spare;  // pieces past the second are simulated but not reported
  for (uint64_t ln = first;; ++ln) {
    uint64_t lo = std::max(addr, ln << m.line_shift);
    uint64_t hi = std::min(addr + size, (ln << m.line_shift) + line_bytes);
    uint64_t gm = m.granule_mask(lo, hi - lo);
    Shard& sh = m.shards[ln & m.shard_mask];
    Guard sg(sh.lock, m.concurrent && !m.lockfree);
    // (Lock mode: messages about this stripe's lines posted since the drain above.)
    if (m.parallel && m.concurrent) m.drain(c, core);
    if (first == last && m.concurrent && !m.lockfree && m.l1_hit(c, ln, gm, write, &ignored))
      return true;
    if (ln == first) {
      c.counters.accesses++;
      res = AccessResult{};
    }
    LineResult* r = &spare;
    if (res.nlines < 2) r = &res.lines[res.nlines++];
    else spare = LineResult{};
    m.access_line(c, core, ln, gm, write, *r);
    if (ln == last) break;
  }
  return false;
}

uint32_t Hierarchy::rivals_within(uint32_t core, uint64_t line, uint64_t lo_line,
                                  uint64_t hi_line, uint32_t enough) {
  Impl& m = *impl_;
  if (core >= m.knobs.cores) core %= m.knobs.cores;
  CoreState& c = m.core(core);
  if (c.victim_depth == 0 || enough == 0) return 0;
  Guard cg(c.lock, m.concurrent && !m.knobs.one_thread_per_core);
  Guard sg(m.shards[line & m.shard_mask].lock, m.concurrent);
  const Cache& l1 = *c.l1;
  const uint32_t set = l1.set_of(line), ways = l1.ways(), depth = c.victim_depth;
  // Called on every L1 conflict miss in a heap object (the exact runtime's attribution), so it
  // stops as soon as it has `enough`, and the common answers cost an add per way and a compare
  // per departure. v - lo < hi - lo as unsigned numbers says lo <= v < hi (and excludes
  // kInvalid, which is no line in any object). Under the object store's lock nothing may
  // allocate: the counted departures live on the stack, and an L1 wider than 64 ways (where
  // conflicts are rare anyway) gets no answer.
  uint64_t counted[2 * 64];
  if (ways > 64 || depth > sizeof counted / sizeof counted[0]) return 0;
  if (hi_line <= lo_line) return 0;
  const uint64_t span = hi_line - lo_line;
  const uint64_t* tags = l1.tag_ptr(size_t(set) * ways);
  // The set's present lines are distinct: counted without comparing them with each other or
  // storing them, and without a branch per way (whether one is inside is data). `line` is
  // usually one of them (the miss just filled it) and is taken off again.
  auto in = [&](uint64_t v) { return uint32_t(v - lo_line < span); };
  uint32_t n = 0, w = 0;
  for (; w + 4 <= ways; w += 4) n += in(tags[w]) + in(tags[w + 1]) + in(tags[w + 2]) + in(tags[w + 3]);
  for (; w < ways; ++w) n += in(tags[w]);
  if (line - lo_line < span && l1.find(line) >= 0) --n;
  if (n >= enough) return enough;
  // The lines that left, newest first, back to `line`'s own eviction. Most of them lie outside
  // the object (the other data sharing the set) and cost a load and a compare; one inside
  // counts unless it is back in the set or already counted.
  const uint64_t* ring = &c.victims[size_t(set) * depth];
  uint32_t at = c.victims_at[set], nc = 0;  // (no division per step: `at` steps back and wraps)
  for (uint32_t k = 1; k <= depth; ++k) {
    at = at == 0 ? depth - 1 : at - 1;
    const uint64_t v = ring[at];
    if (v == line) break;
    if (!in(v)) continue;
    uint32_t dup = 0;
    for (uint32_t i = 0; i < ways; ++i) dup |= tags[i] == v;
    for (uint32_t i = 0; i < nc; ++i) dup |= counted[i] == v;
    if (dup) continue;
    counted[nc++] = v;
    if (++n >= enough) return enough;
  }
  return n;
}


uint64_t Hierarchy::level_bytes(const LevelGeometry& lg, Policy p) {
  const uint64_t sets = lg.sets(), lines = sets * lg.ways;
  uint64_t b = lines * (sizeof(uint64_t) + sizeof(Entry));  // tags and entries
  if (lg.ways <= 16) b += sets * 32 + 64;                    // fingerprint and rank rows
  if (p == Policy::LRU && lg.ways > 16) b += sets * (lg.ways + 1) * sizeof(uint64_t);  // stamps
  if (p == Policy::TreePLRU && lg.ways > 1) b += sets * sizeof(uint64_t);
  // The shadow: a 16-byte node per line, 8-byte slots at load factor <= 1/2 (see FaLru).
  uint64_t slots = 8;
  while (slots < lines * 2) slots <<= 1;
  return b + lines * 16 + slots * 8;
}

// A sharer table slot (24 bytes) at load factor 1/4 to 1/2 per line of the last private level:
// what the directory costs a core without an inclusive shared level (directory.h).
uint64_t Hierarchy::directory_bytes(const CacheGeometry& g) {
  const size_t npriv = g.levels.size() >= 2 ? g.levels.size() - 1 : g.levels.size();
  if (npriv == 0) return 0;
  const LevelGeometry& last = g.levels[npriv - 1];
  return last.size / last.line * 72;
}

uint64_t Hierarchy::core_bytes(const CacheGeometry& g, Policy p) {
  const size_t npriv = g.levels.size() >= 2 ? g.levels.size() - 1 : g.levels.size();
  uint64_t b = sizeof(CoreState);
  for (size_t l = 0; l < npriv; ++l) b += level_bytes(g.levels[l], p);
  if (!g.levels.empty()) {  // the L1 victim log (rivals_within), when it is kept
    const uint64_t sets = g.levels[0].sets(), depth = 2 * uint64_t(g.levels[0].ways);
    if (sets * depth * sizeof(uint64_t) <= kMaxVictimLogBytes) b += sets * depth * sizeof(uint64_t) + sets * 4;
  }
  // Per-set counts of the private levels (Knobs::count_sets, on by default), kept per core.
  for (size_t l = 0; l < npriv; ++l)
    b += std::min(g.levels[l].sets(), kMaxCountedSets) * kNumOutcomes * sizeof(uint64_t);
  return b;
}

Status Hierarchy::add_core(uint32_t core) {
  Impl& m = *impl_;
  const uint32_t id = core % m.knobs.cores;
  if (m.cores[id].load(std::memory_order_acquire)) return Ok{};
  std::lock_guard<std::mutex> g(m.create_mu);
  if (m.cores[id].load(std::memory_order_relaxed)) return Ok{};
  const uint64_t in_use = m.bytes.load(std::memory_order_relaxed);
  const uint32_t n = m.created.load(std::memory_order_relaxed);
  if (m.knobs.memory_budget && in_use + m.core_cost > m.knobs.memory_budget)
    return make_error("a simulated core of " + m.geo.to_spec() + " takes " +
                      approx_size(m.core_cost) + ", and " + std::to_string(n) +
                      (n == 1 ? " core" : " cores") + " already take " + approx_size(in_use) +
                      " of the " + approx_size(m.knobs.memory_budget) +
                      " of memory available; use smaller private levels or fewer cores (--cores)");
  try {
    m.make_core(id);
  } catch (const std::bad_alloc&) {
    return make_error("cannot allocate the " + approx_size(m.core_cost) + " a simulated core of " +
                      m.geo.to_spec() + " takes (" + std::to_string(n) +
                      (n == 1 ? " core" : " cores") +
                      " exist); use smaller private levels or fewer cores (--cores)");
  }
  return Ok{};
}

uint64_t Hierarchy::bytes_in_use() const { return impl_->bytes.load(std::memory_order_relaxed); }

void Hierarchy::set_concurrent(bool on) {
  impl_->concurrent = on;
  impl_->knobs.concurrent = on;
}

bool Hierarchy::forget_history(uint32_t core) {
  Impl& m = *impl_;
  if (m.concurrent && !m.lockfree) return false;
  if (core >= m.knobs.cores) core %= m.knobs.cores;
  CoreState* c = m.cores[core].load(std::memory_order_acquire);
  if (!c) return true;  // never created: no history
  if (m.parallel) m.drain(*c, core);
  c->seen.clear();  // (all three keep their memory: nothing is allocated)
  for (auto& t : c->departures)
    if (t) t->clear();
  for (auto& sh : c->shadow) sh->clear();
  return true;
}

HitMemo* Hierarchy::hit_memo(uint32_t core) {
  return &impl_->core(core % impl_->knobs.cores).memo;
}

uint64_t Hierarchy::walk_step(const LevelGeometry& lg, uint64_t max_lines) {
  const uint64_t lines = lg.sets() * lg.ways;
  if (max_lines == 0 || lines <= max_lines) return 1;
  return (lines + max_lines - 1) / max_lines;
}

void Hierarchy::for_each_line(void (*fn)(size_t, uint32_t, uint64_t, void*), void* arg,
                              uint64_t max_lines) const {
  auto walk = [&](const Cache& c, size_t level, uint32_t core) {
    const uint64_t step = walk_step(impl_->geo.levels[level], max_lines);
    const uint32_t ways = c.ways();
    for (uint64_t set = 0; set < c.sets(); set += step)
      for (uint32_t w = 0; w < ways; ++w)
        if (const uint64_t t = c.tag(size_t(set) * ways + w); t != Cache::kInvalid) fn(level, core, t, arg);
  };
  const uint32_t n = impl_->created.load(std::memory_order_acquire);
  for (uint32_t q = 0; q < n; ++q) {
    const uint32_t id = impl_->created_ids[q];
    const CoreState& c = *impl_->cores[id].load(std::memory_order_acquire);
    for (size_t l = 0; l < c.priv.size(); ++l) walk(*c.priv[l], l, id);
  }
  if (impl_->has_shared) walk(*impl_->shared, impl_->npriv, kSharedLevel);
}

uint64_t Hierarchy::sharers(uint64_t line) const {
  const Impl& m = *impl_;
  if (m.dir() || !m.dir_wanted) return m.dir_get(line);
  // Off: the owner's bit if its last private level holds the line.
  const int64_t o = m.dir_owner.load(std::memory_order_relaxed);
  if (o < 0) return 0;
  const CoreState* c = m.cores[o].load(std::memory_order_acquire);
  return c && c->cache_at[m.npriv - 1]->find(line) >= 0 ? m.owner_bit() : 0;
}

void Hierarchy::drain_all() {
  Impl& m = *impl_;
  if (!m.parallel) return;
  const uint32_t n = m.created.load(std::memory_order_acquire);
  for (uint32_t q = 0; q < n; ++q) {
    const uint32_t id = m.created_ids[q];
    m.drain(*m.cores[id].load(std::memory_order_acquire), id);
  }
}

uint64_t Hierarchy::messages_dropped() const {
  uint64_t n = 0;
  const uint32_t c = impl_->created.load(std::memory_order_acquire);
  for (uint32_t q = 0; q < c; ++q) {
    const CoreState& cs = *impl_->cores[impl_->created_ids[q]].load(std::memory_order_acquire);
    if (cs.inbox) n += cs.inbox->dropped();
  }
  return n;
}

Counters Hierarchy::counters() const {
  Counters total;
  // Lock mode: every stripe lock, in order, so that no access is counting meanwhile (the exit
  // path calls this while other threads may still simulate; each core's counters are written
  // under the stripe lock of the line it accesses). Bounded: the exit path may run in a signal
  // handler on a thread interrupted inside an access, holding a stripe lock it cannot give back,
  // or another thread may be stuck in one; after 100,000 yields (tens of ms) on a stripe, the
  // counts are read without it (they may then miss the access in flight).
  const bool lock = impl_->concurrent;
  const uint64_t nstripes = impl_->shard_mask + 1;
  uint64_t held_words[16] = {};  // which stripes were taken (at most 1,024: Knobs::max_shards)
  static_assert(sizeof(held_words) * 8 >= 1024, "one bit per stripe");
  if (lock)
    for (uint64_t s = 0; s < nstripes && s < 1024; ++s) {
      SpinLock& l = impl_->shards[s].lock;
      bool got = l.try_lock();
      for (unsigned i = 0; !got && i < 100000; ++i) {
        sched_yield();
        got = l.try_lock();
      }
      if (got) held_words[s / 64] |= uint64_t(1) << (s % 64);
    }
  const uint32_t n = impl_->created.load(std::memory_order_acquire);
  for (uint32_t q = 0; q < n; ++q) {
    const CoreState& c = *impl_->cores[impl_->created_ids[q]].load(std::memory_order_acquire);
    total += c.counters;
    for (int w = 0; w < 2; ++w) {
      const uint64_t h = c.memo.hits[w].load(std::memory_order_relaxed);
      total.accesses += h;
      total.line_accesses += h;
      total.level[0].by_outcome[int(Outcome::Hit)][w] += h;
    }
  }
  if (lock)
    for (uint64_t s = std::min<uint64_t>(nstripes, 1024); s-- > 0;)
      if (held_words[s / 64] >> (s % 64) & 1) impl_->shards[s].lock.unlock();
  return total;
}

size_t Hierarchy::set_count_capacity() const {
  size_t n = 0;
  for (const auto& si : impl_->set_index) n += si.rows;
  return n;
}

size_t Hierarchy::set_counts(SetCount* out, size_t max) const {
  const Impl& m = *impl_;
  const uint32_t ncores = m.created.load(std::memory_order_acquire);
  size_t n = 0;
  for (size_t l = 0; l < m.geo.levels.size() && l < kMaxLevels; ++l) {
    const auto& rows = m.set_rows[l];  // the shared level's; private levels' are per core
    for (size_t s = 0; s < m.set_index[l].rows; ++s) {
      SetCount c;
      c.level = uint32_t(l);
      c.set = uint32_t(s);
      uint64_t any = 0;
      if (!rows.empty())
        for (int o = 0; o < kNumOutcomes; ++o) any += c.by_outcome[o] = rows[s * kNumOutcomes + o];
      if (l < m.npriv)
        for (uint32_t q = 0; q < ncores; ++q) {
          const CoreState& cs = *m.cores[m.created_ids[q]].load(std::memory_order_acquire);
          for (int o = 0; o < kNumOutcomes; ++o) {
            const uint64_t v = cs.set_rows[l][s * kNumOutcomes + o];
            c.by_outcome[o] += v;
            any += v;
          }
          if (l != 0 || cs.memo_set_hits.empty()) continue;
          uint64_t h = cs.memo_set_hits[s];
          if (cs.memo.line != HitMemo::kNoLine && cs.memo_set(cs.memo.line) == s) h += cs.memo_pending();
          c.by_outcome[int(Outcome::Hit)] += h;
          any += h;
        }
      if (!any) continue;
      if (n == max) return n;
      out[n++] = c;
    }
  }
  return n;
}

const CacheGeometry& Hierarchy::geometry() const { return impl_->geo; }
const Knobs& Hierarchy::knobs() const { return impl_->knobs; }
size_t Hierarchy::shards() const { return impl_->shard_mask + 1; }
size_t Hierarchy::shared_shards() const { return size_t(1) << impl_->l3_bits; }

}  // namespace whymiss::sim
