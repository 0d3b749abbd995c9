#include "runtime/exact/spatial.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "runtime/common/heap_internal.h"
#include "runtime/exact/count_up.h"

namespace whymiss::rt::spatial {
namespace {

// 64 counters, one per bit of a mask, kept bit-sliced: plane j holds bit j of every counter,
// so adding a mask (1 to the counter of each set bit) is a ripple-carry add across the planes,
// ~2 planes on average whatever the number of bits, where a loop over the bits cost ~8
// instructions a bit (a line with 8 bytes touched: ~60 per eviction). A counter that would pass
// 2^kPlanes - 1 carries into `spill` (64 plain counters). Not atomic: for serialised callers and
// holders of the slot's lock.
struct SlicedCounts {
  static constexpr int kPlanes = 16;
  uint64_t plane[kPlanes];
  // Returns what went to `spill` (a multiple of 2^kPlanes; rarely not 0).
  uint64_t add(uint64_t mask, uint64_t* spill) {
    for (int j = 0; j < kPlanes && mask; ++j) {
      const uint64_t p = plane[j];
      plane[j] = p ^ mask;
      mask &= p;
    }
    uint64_t spilled = 0;
    for (; mask; mask &= mask - 1) {
      spill[__builtin_ctzll(mask)] += uint64_t(1) << kPlanes;
      spilled += uint64_t(1) << kPlanes;
    }
    return spilled;
  }
  uint64_t count(int bit) const {
    uint64_t c = 0;
    for (int j = 0; j < kPlanes; ++j) c |= ((plane[j] >> bit) & 1) << j;
    return c;
  }
};

// A slot is claimed by CAS on `serial` (0 = free). `full`: lines wholly inside the object,
// added to every fetched[] phase at export; `all_touched`: those of them touched in every byte,
// added to every touched[] phase (the common cases, a line of a big array, need no per-byte
// work). The per-phase counts of other lines go to `touched_sliced` and `fetched_sliced` (by
// phase: the line's byte mask rotated by the phase of its byte 0), which export adds to
// rec.touched[], rec.fetched[] and, for touched, rec.touched_bytes. Callers that are not
// serialised (threads simulating at once) hold `lock` for the update: one locked exchange, where
// an atomic add per counter and per touched byte cost a multi-threaded zstd -3 7 % of its time
// (10-12 locked adds per eviction of a hash table's line). It is uncontended unless two threads
// evict lines of one object at once. (Serialisation changes only while one thread runs.)
struct Slot {
  uint64_t serial;
  uint64_t full;
  uint64_t all_touched;
  HeapLock lock;
  profile::ObjectUseRecord rec;
  SlicedCounts touched_sliced, fetched_sliced;
};

inline uint64_t rotl(uint64_t x, unsigned s) { return (x << s) | (x >> ((64 - s) & 63)); }

Slot* g_slots = nullptr;
bool g_on = false;
unsigned g_line_shift = 6;
std::atomic<uint64_t> g_evicted{0}, g_outside{0}, g_dropped_lines{0};

std::atomic<uint32_t> g_used{0};

Slot* slot_of(uint64_t serial) {
  uint32_t i = uint32_t((serial * 0x9E3779B97F4A7C15ull) >> 32) & (kUseObjects - 1);
  for (uint32_t probes = 0; probes < kUseObjects; ++probes, i = (i + 1) & (kUseObjects - 1)) {
    Slot& s = g_slots[i];
    uint64_t k = __atomic_load_n(&s.serial, __ATOMIC_ACQUIRE);
    if (k == serial) return &s;
    if (k != 0) continue;
    // Keep a quarter free: probes stay short, and a full table drops instead of walking it all.
    if (g_used.load(std::memory_order_relaxed) >= kUseObjects / 4 * 3) return nullptr;
    if (__atomic_compare_exchange_n(&s.serial, &k, serial, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      g_used.fetch_add(1, std::memory_order_relaxed);
      return &s;
    }
    if (k == serial) return &s;
  }
  return nullptr;
}

}  // namespace

void start(unsigned line_shift) noexcept {
  g_line_shift = line_shift;
  const char* e = std::getenv("WHYMISS_SPATIAL");
  if ((e && std::strcmp(e, "0") == 0) || line_shift > 6) return;
  g_slots = static_cast<Slot*>(private_alloc(sizeof(Slot) * kUseObjects));
  if (g_slots) std::memset(static_cast<void*>(g_slots), 0, sizeof(Slot) * kUseObjects);  // (zero: every lock free)
  g_on = g_slots != nullptr;
}

bool on() noexcept { return g_on; }

void seen(bool serialised) noexcept {
  count_up(g_evicted, serialised);
}

void outside(bool serialised) noexcept {
  count_up(g_outside, serialised);
}

void add(uint64_t seen, uint64_t outside) noexcept {
  if (seen) g_evicted.fetch_add(seen, std::memory_order_relaxed);
  if (outside) g_outside.fetch_add(outside, std::memory_order_relaxed);
}

void evicted(const HeapObject& o, uint64_t line, uint64_t mask, bool serialised) noexcept {
  Slot* s = slot_of(o.serial);
  if (!s) {
    g_dropped_lines.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  profile::ObjectUseRecord& r = s->rec;
  const uint64_t lb = uint64_t(1) << g_line_shift, base = line << g_line_shift;
  const uint64_t lo = base > o.start ? base : o.start;
  const uint64_t end = o.start + o.size, hi = base + lb < end ? base + lb : end;
  if (hi <= lo) return;  // (a zero-sized object)
  // Bytes of the line inside the object: [lo - base, hi - base). Phase of line byte i:
  // (base + i - start) mod 64.
  const uint64_t inside = (hi - lo) >= 64 ? ~uint64_t(0) : ((uint64_t(1) << (hi - lo)) - 1) << (lo - base);
  const uint64_t used = mask & inside;
  const unsigned shift = unsigned((base - o.start) & 63);  // phase of line byte 0
  const bool full = hi - lo == 64;
  if (!serialised) s->lock.lock();
  r.lines++;
  r.fetched_bytes += hi - lo;
  if (full) s->full++;
  else s->fetched_sliced.add(rotl(inside, shift), r.fetched);
  if (full && used == ~uint64_t(0)) {
    s->all_touched++;
    r.touched_bytes += 64;
  } else {
    // (touched_bytes: what spilled now, what the planes hold at export)
    r.touched_bytes += s->touched_sliced.add(rotl(used, shift), r.touched);
  }
  if (!serialised) s->lock.unlock();
}

size_t count() noexcept { return g_on ? g_used.load(std::memory_order_relaxed) : 0; }

size_t export_records(profile::ObjectUseRecord* out, size_t max) noexcept {
  if (!g_on) return 0;
  size_t n = 0;
  for (uint32_t i = 0; i < kUseObjects && n < max; ++i) {
    const Slot& s = g_slots[i];
    if (__atomic_load_n(&s.serial, __ATOMIC_ACQUIRE) == 0 || s.rec.lines == 0) continue;
    profile::ObjectUseRecord& r = out[n++];
    r = s.rec;
    r.serial = s.serial;
    for (int p = 0; p < profile::kUsePhases; ++p) {
      const uint64_t touched = s.touched_sliced.count(p);
      r.fetched[p] += s.full + s.fetched_sliced.count(p);
      r.touched[p] += s.all_touched + touched;
      r.touched_bytes += touched;
    }
  }
  return n;
}

profile::ObjectUseInfoRecord info() noexcept {
  profile::ObjectUseInfoRecord r{};
  r.line_bytes = uint32_t(1) << g_line_shift;
  r.capacity = kUseObjects / 4 * 3;
  r.evicted_lines = g_evicted.load(std::memory_order_relaxed);
  r.outside_lines = g_outside.load(std::memory_order_relaxed);
  r.objects = g_used.load(std::memory_order_relaxed);
  r.dropped_lines = g_dropped_lines.load(std::memory_order_relaxed);
  return r;
}

}  // namespace whymiss::rt::spatial
