// The cache-hierarchy simulator: whymiss's ground truth.
//
// N simulated cores, each with private levels (all but the last level of the geometry), and one
// shared last level. Private levels are inclusive of the levels above them (L2 holds all of L1);
// the shared level is inclusive (evictions back-invalidate private copies) or non-inclusive.
// Write-allocate, write-back. MESI coherence between the cores' private hierarchies.
//
// Every miss gets exactly one kind, decided at the level where it happens, in this order:
//   compulsory  the first access to the line by this core (at a private level), or by any core
//               (at the shared level): the line was never in this cache's reach before;
//   coherence   another core's write invalidated this core's copy since this core last held the
//               line at this level; FalseSharing if the bytes written by that invalidating write
//               overlap neither the bytes of this access nor the bytes this core accessed during
//               its previous tenure of the line, else TrueSharing;
//   capacity    it would also miss in a fully-associative LRU cache of the same number of lines
//               fed the same accesses (a per-core shadow for private levels, one shared shadow
//               for the shared level);
//   conflict    otherwise.
// Bytes are tracked per line at granule = max(1, line/64) bytes (exact bytes for 64-byte lines).
//
// Thread safety: access() may be called concurrently from many threads. Lines are split into
// shards by their low line-address bits; a shard owns the same sets in every level, so one
// shard lock covers a whole access. Work at the shared level (an L2 miss, an upgrade) also takes
// the lock of the shared level's part that holds the line's set (parts are hashed set indices,
// docs/parallel-sim.md), inside the shard's; other cores' copies are found through a directory
// (sim/directory.h), not by looking in every core. Per-core state (shadows, first-touch sets) has a per-core
// lock, taken only by threads that feed that core. Counters and the private levels' per-set
// counts are per core too, written by the thread simulating an access (events it causes in other
// cores' copies count in its own core's counters), so that a private hit writes no host line
// another thread writes; counters() sums them. Departures are per core and shard (another core's
// snoop writes them under the shard lock). With Knobs::parallel and one thread per core (at most
// 64 cores) no stripe lock is taken at all: a core's thread alone writes its private state, other
// cores post to its inbox, and only shared-level work takes a part lock. With
// Knobs::concurrent = false no lock is taken and the caller must serialise; Hierarchy::set_concurrent switches between the two at run
// time (a program starts with one thread and turns the locks on before it starts the second).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "model/geometry.h"
#include "model/result.h"

namespace whymiss::sim {

enum class Outcome : uint8_t { Hit, Compulsory, Capacity, Conflict, TrueSharing, FalseSharing };
inline constexpr int kNumOutcomes = 6;
const char* outcome_name(Outcome o);  // "hit", "compulsory", "capacity", "conflict",
                                      // "true_sharing", "false_sharing"

enum class Policy : uint8_t { LRU, TreePLRU, Random };
Result<Policy> parse_policy(std::string_view name);  // "lru", "plru", "random"
const char* policy_name(Policy p);

struct Knobs {
  uint32_t cores = 1;          // simulated cores; cores are numbered 0..cores-1
  Policy policy = Policy::LRU; // replacement policy of every level (shadows are always LRU)
  bool inclusive_llc = true;   // shared level back-invalidates private copies on eviction
  bool concurrent = true;      // take locks; false = caller serialises all accesses
  bool one_thread_per_core = false;  // caller promises no two threads feed one core at once:
                                     // the per-core lock is skipped (shard locks stay)
  uint32_t max_shards = 64;    // upper bound on lock shards (power of two)
  // The parallel simulator's protocol (docs/parallel-sim.md, section 2): another core's access
  // never writes this core's arrays; it posts a message to its inbox (an invalidation, a
  // downgrade, a back-invalidation), which this core applies at the start of its next access
  // (HitMemo::pending keeps the memo from hitting meanwhile). Fed one access at a time it gives
  // exactly what the direct protocol gives, with up to 64 cores (above, a directory bit stands
  // for several cores and every one of them gets the message: an E fill may become S).
  // Counters of effects still in an inbox lag until drain_all() or the core's next access.
  // With one_thread_per_core and at most 64 cores it is lock-free (see the file comment); then
  // counters(), set_counts() and for_each_line() need every feeder stopped, not just the
  // stripe locks.
  bool parallel = false;
  uint64_t seed = 1;           // for Policy::Random
  // Bytes the simulator may take for its caches and shadows, as Hierarchy::level_bytes estimates
  // them before anything is allocated; 0 = no limit. create() refuses a geometry whose shared
  // level and first core exceed it, add_core() a core that would take the total past it: one
  // sentence instead of an allocation failure or the OOM killer (a 1 GiB L1 costs ~1 GiB a core).
  uint64_t memory_budget = 0;
  // Count accesses and outcomes per set of every level (Hierarchy::set_counts, for the `sets`
  // view): one increment per level an access reaches, off the memo's hit path.
  bool count_sets = true;
};

enum class Mesi : uint8_t { I = 0, S, E, M };

// One cached copy's bookkeeping (a way of a set-associative array).
struct Entry {
  uint64_t mask = 0;  // granules accessed by this holder since the line was filled here
  Mesi state = Mesi::I;
  bool dirty = false;
  // Private levels but the last: the line's index in the next level when it was filled here
  // (inclusion put it there). A hint, checked against that slot's tag before use: a middle
  // level may have evicted the line since (only the last private level back-invalidates).
  uint32_t below = 0;
};
static_assert(sizeof(Entry) == 16);

// The granules (bits of a 64-bit mask) that `len` >= 1 bytes at `addr` touch in their line;
// granule = 2^granule_shift bytes, line = 2^line_shift bytes (see the file comment).
inline uint64_t granule_mask(uint64_t addr, uint64_t len, unsigned line_shift,
                             unsigned granule_shift) {
  const uint64_t off = addr & ((uint64_t(1) << line_shift) - 1);
  const uint64_t first = off >> granule_shift, last = (off + len - 1) >> granule_shift;
  const uint64_t n = last - first + 1;
  return (n >= 64 ? ~uint64_t(0) : ((uint64_t(1) << n) - 1)) << first;
}

// The line a core accessed last and its L1 entry, for callers with a hit path of their own (the
// exact runtime checks it inline on every instrumented access; Hierarchy::access does the same).
// Contract: only while the simulator is not concurrent (then only the calling thread touches the
// core), or is lock-free (Knobs::parallel with one thread per core, at most 64 cores: other
// cores post to the inbox and `pending` keeps the memo off), only by the thread feeding `core`. try_hit() applies a one-line access to that line, if
// it is still in its L1 slot with enough rights (a read, or a write to a line held M), exactly as
// access() would: the granule mask, the dirty bit and the hit count change, nothing else can.
struct HitMemo {
  static constexpr uint64_t kNoLine = ~uint64_t(0);
  uint64_t line = kNoLine;
  uint64_t base = 0;              // line << line_shift
  const uint64_t* tag = &kNoTag;  // the L1 tag slot of `line`: valid while *tag == line
  Entry* entry = nullptr;
  uint32_t line_bytes = 64;
  unsigned line_shift = 6, granule_shift = 0;
  // Messages posted to this core's inbox and not yet applied (Knobs::parallel): while non-zero
  // no hit is taken here, as the line may be invalidated. Posters add, the core's feeder
  // subtracts what it applied.
  std::atomic<uint32_t> pending{0};
  // Hits taken here or by the simulator's L1 fast path, [0 read, 1 write]. One writer at a time
  // (the core's feeder); relaxed load + store, so no locked instruction; counters() sums them.
  std::atomic<uint64_t> hits[2] = {};
  static constexpr uint64_t kNoTag = kNoLine - 1;  // never equal to `line`: no memo, no hit

  void bump(bool write) {
    hits[write].store(hits[write].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // size >= 1. Returns false, having changed nothing, when the access needs access().
  bool try_hit(uint64_t addr, uint32_t size, bool write) {
    const uint64_t off = addr - base;  // huge when addr < base
    if (off >= line_bytes || off + size > line_bytes || *tag != line ||
        pending.load(std::memory_order_relaxed) != 0)
      return false;
    Entry& e = *entry;
    if (write && e.state != Mesi::M) return false;
    e.mask |= granule_shift == 0 ? ((uint64_t(2) << (size - 1)) - 1) << off
                                 : granule_mask(addr, size, line_shift, granule_shift);
    e.dirty |= write;
    bump(write);
    return true;
  }
  // Like try_hit, for a core whose lines another thread may invalidate or downgrade meanwhile
  // (exact mode's relay), and changing nothing but `hits`: true only when the line is held, the
  // access's granules are already in the tenure mask and, for a write, the copy is already M and
  // dirty. Each field is read once, before or after such a change; every after-value fails a
  // check, so a true answer orders this hit before the change. The caller bumps `hits` (the
  // memo itself, line..entry, must not change meanwhile: only the core's own feeder sets it).
  bool holds(uint64_t addr, uint32_t size, bool write) const {
    const uint64_t off = addr - base;
    if (off >= line_bytes || off + size > line_bytes || __atomic_load_n(tag, __ATOMIC_RELAXED) != line ||
        pending.load(std::memory_order_relaxed) != 0)
      return false;
    const uint64_t need = granule_shift == 0 ? ((uint64_t(2) << (size - 1)) - 1) << off
                                             : granule_mask(addr, size, line_shift, granule_shift);
    const Mesi st = __atomic_load_n(&entry->state, __ATOMIC_RELAXED);
    if (write ? st != Mesi::M || !__atomic_load_n(&entry->dirty, __ATOMIC_RELAXED) : st == Mesi::I)
      return false;
    return (__atomic_load_n(&entry->mask, __ATOMIC_RELAXED) & need) == need;
  }
};

// What happened to one line-sized piece of an access, per level it reached.
struct LineResult {
  uint64_t line = 0;                       // line address (addr / line size)
  std::array<Outcome, kMaxLevels> level{}; // level[i] valid for i < levels_reached
  uint8_t levels_reached = 0;              // 1 = served by L1 ... n+1 (n levels) = from memory
  uint8_t upgrade = 0;                     // a write hit on a shared copy invalidated others
  uint16_t invalidated = 0;                // other cores' copies this access invalidated
  uint64_t access_mask = 0;                // granules of the line this access touched
  // Evidence for a sharing miss (zero otherwise): who invalidated this core's copy, which
  // granules that write touched, and which granules this core had touched in its tenure.
  uint32_t writer_core = 0;
  uint64_t writer_mask = 0;
  uint64_t tenure_mask = 0;
  // When l1_victim_mask != 0: this access's L1 fill evicted line l1_victim to make room, and
  // l1_victim_mask holds the granules its holder touched while L1 held it (never 0: every fill
  // is for an access): the evidence for spatial use. Both 0 when the line hit L1 or the fill
  // found a free way. (Zero by default, so a result clears with the rest of it.) Lines that
  // leave L1 otherwise (another core's write, inclusion when a lower level evicts) are not
  // reported here.
  uint64_t l1_victim = 0;
  uint64_t l1_victim_mask = 0;
  bool from_memory(size_t nlevels) const { return levels_reached > nlevels; }
};

// An access covers one line, or two when it straddles a line boundary.
struct AccessResult {
  std::array<LineResult, 2> lines{};
  uint8_t nlines = 0;
};

struct LevelCounters {
  uint64_t by_outcome[kNumOutcomes][2] = {};  // [outcome][0 read, 1 write]
  uint64_t writebacks = 0;          // dirty lines this level evicted towards the next level/memory
  uint64_t upgrades = 0;            // write hits on shared lines (coherence traffic, not misses)
  uint64_t coherence_invalidations = 0;  // copies removed here by another core's write
  uint64_t back_invalidations = 0;       // copies removed here by inclusion (a lower level evicted)

  uint64_t accesses() const;
  uint64_t hits() const { return by_outcome[0][0] + by_outcome[0][1]; }
  uint64_t misses() const { return accesses() - hits(); }
  uint64_t misses_of(Outcome o) const {
    return by_outcome[int(o)][0] + by_outcome[int(o)][1];
  }
  LevelCounters& operator+=(const LevelCounters& o);
};

struct Counters {
  std::array<LevelCounters, kMaxLevels> level{};
  uint64_t accesses = 0;       // accesses as given (before splitting at line boundaries)
  uint64_t line_accesses = 0;  // line-sized pieces
  Counters& operator+=(const Counters& o);
};

// Accesses and outcomes of one set of one level, summed over cores (set_counts()). Levels with
// more than kMaxCountedSets sets are folded: `set` is the set index modulo kMaxCountedSets.
struct SetCount {
  uint32_t level = 0;
  uint32_t set = 0;
  uint64_t by_outcome[kNumOutcomes] = {};  // [Outcome]: hits and misses by kind
};
inline constexpr uint64_t kMaxCountedSets = 65536;

class Hierarchy {
 public:
  // Largest level it will model: its tags and fully-associative shadow cost ~56 bytes a line.
  static constexpr uint64_t kMaxLevelBytes = uint64_t(1) << 30;
  // Fails with one sentence on an invalid geometry or knobs, or when the shared level and one
  // core would not fit in knobs.memory_budget or cannot be allocated. Never throws.
  static Result<std::unique_ptr<Hierarchy>> create(const CacheGeometry& g, const Knobs& k);
  // What one level of the geometry costs in memory (its tags, entries, replacement state and
  // fully-associative shadow), and one core's private levels together. First-touch sets, which
  // grow with the footprint, are not included.
  static uint64_t level_bytes(const LevelGeometry& lg, Policy p);
  static uint64_t core_bytes(const CacheGeometry& g, Policy p);
  // What the directory adds per core, with more than one core and no inclusive shared level.
  static uint64_t directory_bytes(const CacheGeometry& g);
  ~Hierarchy();
  Hierarchy(const Hierarchy&) = delete;
  Hierarchy& operator=(const Hierarchy&) = delete;

  // Simulates one access of `size` bytes (1..4096) at `addr` by simulated core `core`
  // (< knobs.cores). Accesses longer than a line are split; AccessResult describes the first two
  // pieces, counters count all of them.
  AccessResult access(uint32_t core, uint64_t addr, uint32_t size, bool write);
  // The same simulation, for callers that only look at misses: returns true, leaving `out`
  // untouched, when the access was one line that hit L1 without changing any coherence state
  // (a read, or a write to a line this core holds M); otherwise fills `out` exactly as the
  // overload above would and returns false (`out` may then still show an L1 hit, e.g. a write
  // upgrading a shared line). Cheaper: such a hit needs no result and, when not concurrent, no
  // lock.
  bool access(uint32_t core, uint64_t addr, uint32_t size, bool write, AccessResult& out);

  // Turns the locks on (true) or off (false, the caller then serialises every access; the same
  // as Knobs::concurrent = false). Contract: no access() may be in flight or start during the
  // call, and every thread that calls access() afterwards must be ordered after the call (for
  // instance: called by the only thread there is, before it creates the next one; pthread_create
  // orders the new thread after it). Counters and state carry over unchanged.
  void set_concurrent(bool on);

  // Creates core `core`'s private levels now (core % knobs.cores), unless they exist. Fails with
  // one sentence, having created nothing, when they would take the simulator past
  // knobs.memory_budget or cannot be allocated. Never throws. Cores are created on first use:
  // access() and hit_memo() create a core nobody added, and may then throw std::bad_alloc, so a
  // caller that must not fail (exact mode, inside someone else's program) adds every core first.
  // Same threading contract as access().
  Status add_core(uint32_t core);
  // A new thread takes over core `core` from one that ended (exact mode's parallel mode gives a
  // later thread the core of one that ended): the core forgets which lines it accessed and why it
  // lost lines (its first-touch set, its departures and its private levels' shadows), so that the
  // new thread's first miss on a line is compulsory, as on a core of its own, not a coherence
  // miss inherited from the thread before; its caches stay as that thread left them. Lines it
  // finds there are hits, and if one leaves and misses again, compulsory once more (counted,
  // never blamed). Messages in its inbox are applied first. False, and nothing done, when the
  // simulator takes locks without being lock-free (threads folded onto cores): then the caller
  // could not be the core's only user. Otherwise the caller must be the core's only feeder, after
  // the previous feeder's last access (or serialise every access, concurrent off).
  bool forget_history(uint32_t core);
  // Bytes the created cores and the shared level take (level_bytes' estimate).
  uint64_t bytes_in_use() const;

  // Core `core`'s memo (created with the core; lives as long as the Hierarchy). See HitMemo for
  // when a caller may use it.
  HitMemo* hit_memo(uint32_t core);

  // Evidence for who caused a conflict miss at L1, asked right after access() reported one on
  // `line` for `core`: how many distinct lines in [lo_line, hi_line) other than `line` went
  // through `line`'s L1 set since `line` was last evicted from it, i.e. the set's present lines
  // and those that left it (evicted, or dropped by inclusion) after `line` did, as far back as its
  // victim log reaches (2 x ways departures; 0 when the log is off, see kMaxVictimLogBytes, or the
  // L1 has more than 64 ways). Under LRU every such line was accessed after `line` last was, so
  // once they number the ways they alone would have evicted `line` (other policies: roughly):
  // with [lo_line, hi_line) the lines of one object, that says whether the object's own layout
  // caused the miss (a stride within it) or other data mapping to the same set did. Counting
  // stops at `enough`. Takes the same locks as access().
  uint32_t rivals_within(uint32_t core, uint64_t line, uint64_t lo_line, uint64_t hi_line,
                         uint32_t enough);
  // The victim log (L1 lines evicted, per set) costs 16 x ways bytes a set and core; above this
  // many bytes a core it is not kept and rivals_within() answers 0.
  static constexpr uint64_t kMaxVictimLogBytes = uint64_t(4) << 20;

  // Calls fn(level, core, line, arg) for every line resident in a created core's private
  // levels (core = that core) and in the shared level (core = kSharedLevel). Same threading
  // contract as set_concurrent: no access may be in flight (a caller that serialises every
  // access may call it between two). Takes no lock and allocates nothing. With max_lines > 0,
  // a cache of more lines is walked at every walk_step()-th set only (sets 0, step, 2 x step,
  // ...), which bounds the cost of a walk: the caller scales what it counts there by the step.
  static constexpr uint32_t kSharedLevel = ~0u;
  void for_each_line(void (*fn)(size_t level, uint32_t core, uint64_t line, void* arg),
                     void* arg, uint64_t max_lines = 0) const;
  // The set step for_each_line uses for a level: the smallest that walks at most max_lines
  // lines (1 when max_lines is 0 or the level is no bigger).
  static uint64_t walk_step(const LevelGeometry& lg, uint64_t max_lines);

  // The directory's word for `line` (see sim/directory.h): bit (core % 64) set for each core
  // whose last private level holds it. For tests; same threading contract as for_each_line.
  uint64_t sharers(uint64_t line) const;

  // Knobs::parallel: applies every core's inbox, so that counters(), set_counts() and
  // for_each_line() see every effect. Same threading contract as for_each_line.
  void drain_all();
  // Messages a full inbox dropped (Knobs::parallel; its capacity makes it 0).
  uint64_t messages_dropped() const;

  Counters counters() const;  // sum over cores; consistent when no access is in flight
  // The per-set counts of every level (Knobs::count_sets), sets with no access left out, level
  // by level, set by set; at most `max` into `out`, returns how many. Hits the memo took are
  // credited to the set of the line they were taken on. Consistent when no access is in flight
  // (the caller serialises). Allocates nothing.
  size_t set_counts(SetCount* out, size_t max) const;
  size_t set_count_capacity() const;  // an upper bound of what set_counts() returns
  const CacheGeometry& geometry() const;
  const Knobs& knobs() const;
  size_t shards() const;         // lock mode's stripes (line address bits)
  size_t shared_shards() const;  // the shared level's parts (hashed set index)

 private:
  struct Impl;
  explicit Hierarchy(std::unique_ptr<Impl> impl);
  // create() past its checks; throws std::bad_alloc.
  static Result<std::unique_ptr<Hierarchy>> create_unchecked(const CacheGeometry& g, const Knobs& k,
                                                             uint64_t core_cost,
                                                             uint64_t shared_cost);
  std::unique_ptr<Impl> impl_;
};

}  // namespace whymiss::sim
