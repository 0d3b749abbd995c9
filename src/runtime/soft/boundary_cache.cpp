// Lock-free cache of per-function instruction boundaries (see boundary_cache.h).
#include "runtime/soft/boundary_cache.h"

#include <Zydis/Zydis.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <new>

namespace whymiss::soft::detail {
namespace {

enum : uint32_t { kEmpty = 0, kReady = 1, kFailed = 2 };
constexpr int kMaxProbes = 128;  // linear probing; lookups of cached keys stop early

struct Slot {
  std::atomic<uint64_t> key;     // function start; 0 = free. Claimed once, never released.
  std::atomic<uint32_t> state;   // kEmpty while its claimer decodes, then kReady or kFailed
  uint32_t module_id;
  uint32_t count;                // entries in data: instruction starts plus the end
  uint32_t wide;                 // entries are uint32_t offsets (else uint16_t)
  uint64_t data;                 // byte offset of the entries in the data area
};

struct Arena {
  Slot* slots = nullptr;
  uint64_t slot_mask = 0;
  uint8_t* data = nullptr;
  uint64_t data_size = 0;
  std::atomic<uint64_t> used{0};
  void* map = nullptr;
  size_t map_size = 0;
};

std::atomic<Arena*> g_arena{nullptr};
std::atomic<uint64_t> g_cached{0}, g_full{0}, g_hits{0}, g_misses{0};

void bump(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }

// Calls visit(offset) for each instruction start of [start, end) and once more for the offset
// where decoding stopped (end, or an undecodable byte). Returns the number of calls.
template <class F>
uint32_t walk(uint64_t start, uint64_t end, F visit) {
  uint64_t p = start;
  uint32_t n = 0;
  while (p < end) {
    const uint8_t len = length_at(reinterpret_cast<const uint8_t*>(p), end - p);
    if (len == 0) break;
    visit(p - start);
    ++n;
    p += len;
  }
  visit(p - start);
  return n + 1;
}

// Binary search of next_ip among the boundaries; the entry before it is the answer.
template <class T>
Lookup search(const T* v, uint32_t count, uint64_t start, uint64_t next_ip, uint64_t* prev) {
  const uint64_t target = next_ip - start;
  uint32_t lo = 0, hi = count;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (v[mid] < target) lo = mid + 1; else hi = mid;
  }
  if (lo == 0 || lo >= count || v[lo] != target) return Lookup::NotBoundary;
  *prev = start + v[lo - 1];
  return Lookup::Found;
}

Lookup lookup_slot(const Arena& a, const Slot& s, uint64_t start, uint64_t next_ip,
                   uint64_t* prev) {
  const uint8_t* d = a.data + s.data;
  if (s.wide) return search(reinterpret_cast<const uint32_t*>(d), s.count, start, next_ip, prev);
  return search(reinterpret_cast<const uint16_t*>(d), s.count, start, next_ip, prev);
}

constexpr uint64_t round8(uint64_t x) { return (x + 7) & ~uint64_t{7}; }

// Reserves `bytes` of the data area if they fit (so one huge function does not lock out the
// small ones after it); returns the offset or UINT64_MAX.
uint64_t reserve(Arena& a, uint64_t bytes) {
  uint64_t off = a.used.load(std::memory_order_relaxed);
  do {
    if (off + bytes > a.data_size) return UINT64_MAX;
  } while (!a.used.compare_exchange_weak(off, off + bytes, std::memory_order_relaxed));
  return off;
}

// Decodes the function into the arena and publishes the slot this thread claimed. One pass into
// a worst-case reservation (one entry per byte) whose unused tail is handed back if nobody
// reserved after it; if even that does not fit, counts first and reserves the exact size.
Lookup fill(Arena& a, Slot& s, uint64_t start, uint64_t end, uint32_t module_id,
            uint64_t next_ip, uint64_t* prev) {
  const uint32_t wide = end - start > UINT16_MAX;
  const uint64_t entry = wide ? 4 : 2;
  uint64_t cap = end - start + 1;
  uint64_t off = reserve(a, round8(cap * entry));
  if (off == UINT64_MAX) {
    cap = walk(start, end, [](uint64_t) {});
    off = reserve(a, round8(cap * entry));
  }
  if (off == UINT64_MAX) {
    s.state.store(kFailed, std::memory_order_release);
    bump(g_full);
    return Lookup::Full;
  }
  uint8_t* d = a.data + off;
  uint32_t i = 0;
  if (wide)
    walk(start, end, [&](uint64_t o) { if (i < cap) reinterpret_cast<uint32_t*>(d)[i++] = static_cast<uint32_t>(o); });
  else
    walk(start, end, [&](uint64_t o) { if (i < cap) reinterpret_cast<uint16_t*>(d)[i++] = static_cast<uint16_t>(o); });
  uint64_t top = off + round8(cap * entry);
  a.used.compare_exchange_strong(top, off + round8(i * entry), std::memory_order_relaxed);
  s.module_id = module_id;
  s.count = i;
  s.wide = wide;
  s.data = off;
  s.state.store(kReady, std::memory_order_release);
  bump(g_cached);
  return lookup_slot(a, s, start, next_ip, prev);
}

}  // namespace

namespace {
std::atomic<PatchedByteFn> g_patched_byte{nullptr};
}

void set_patched_byte_hook(PatchedByteFn f) { g_patched_byte.store(f, std::memory_order_release); }

const uint8_t* program_bytes(const uint8_t* p, size_t avail, uint8_t* buf) {
  if (!avail || __atomic_load_n(p, __ATOMIC_RELAXED) != 0xCC) return p;
  uint8_t first = 0;
  const PatchedByteFn f = g_patched_byte.load(std::memory_order_acquire);
  if (!f || !f(reinterpret_cast<uint64_t>(p), &first)) return p;
  const size_t n = avail < 15 ? avail : 15;
  for (size_t i = 0; i < n; ++i) buf[i] = p[i];
  buf[0] = first;
  return buf;
}

uint8_t length_at(const uint8_t* p, size_t avail) {
  uint8_t copy[15];
  if (const uint8_t* q = program_bytes(p, avail, copy); q != p) {
    p = q;
    avail = avail < sizeof copy ? avail : sizeof copy;
  }
  ZydisDecoder dec;
  ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  ZydisDecoderEnableMode(&dec, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
  ZydisDecodedInstruction in;
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, nullptr, p, avail < 15 ? avail : 15, &in)))
    return 0;
  return in.length;
}

bool cache_init(size_t bytes) {
  cache_reset();
  if (bytes < 4096) bytes = 4096;
  // `bytes` for boundary offsets (~100 bytes for a function of 50 instructions) plus one slot
  // (32 bytes) per 128 of them, so slots and data run out at about the same number of functions.
  uint64_t slots = 16;
  while (slots * 2 * 128 <= bytes) slots *= 2;
  const size_t slot_bytes = slots * sizeof(Slot);
  void* m = mmap(nullptr, bytes + slot_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (m == MAP_FAILED) return false;
  auto* a = new (m) Arena;  // the header lives in the mapping's first bytes
  a->map = m;
  a->map_size = bytes + slot_bytes;
  const size_t header = (sizeof(Arena) + 63) & ~size_t{63};
  a->slots = reinterpret_cast<Slot*>(static_cast<uint8_t*>(m) + header);
  a->slot_mask = slots - 1;
  a->data = reinterpret_cast<uint8_t*>(a->slots + slots);
  a->data_size = a->map_size - header - slot_bytes;
  // Fault the slot table in now: slots are hit at random, and a first-touch page fault inside
  // the signal handler costs microseconds on a VM. The data area fills in order, so it is left lazy.
  std::memset(static_cast<void*>(a->slots), 0, slot_bytes);
  g_arena.store(a, std::memory_order_release);
  return true;
}

void cache_reset() {
  Arena* a = g_arena.exchange(nullptr, std::memory_order_acq_rel);
  if (a) munmap(a->map, a->map_size);
  g_cached = g_full = g_hits = g_misses = 0;
}

Lookup scan_previous(uint64_t start, uint64_t end, uint64_t next_ip, uint64_t* prev) {
  uint64_t last = UINT64_MAX, before = UINT64_MAX;
  bool hit = false;
  // Stops as soon as it reaches next_ip: decoding further is wasted work.
  uint64_t stop = next_ip < end ? next_ip : end;
  walk(start, stop, [&](uint64_t o) {
    before = last;
    last = o;
    hit = start + o == next_ip;
  });
  if (!hit || before == UINT64_MAX) return Lookup::NotBoundary;
  *prev = start + before;
  return Lookup::Found;
}

Lookup cache_previous(uint64_t start, uint64_t end, uint32_t module_id, uint64_t next_ip,
                      uint64_t* prev, bool* hit) {
  *hit = false;
  Arena* a = g_arena.load(std::memory_order_acquire);
  if (!a || start == 0) return Lookup::Full;
  uint64_t h = (start * 0x9E3779B97F4A7C15ull) >> 17;
  for (int probe = 0; probe < kMaxProbes; ++probe, ++h) {
    Slot& s = a->slots[h & a->slot_mask];
    uint64_t key = s.key.load(std::memory_order_acquire);
    if (key == 0) {
      if (s.key.compare_exchange_strong(key, start, std::memory_order_acq_rel)) {
        bump(g_misses);
        return fill(*a, s, start, end, module_id, next_ip, prev);
      }
      // Lost the race: `key` now holds the winner's function; fall through to compare.
    }
    if (key != start) continue;
    const uint32_t state = s.state.load(std::memory_order_acquire);
    if (state == kReady && s.module_id == module_id) {
      *hit = true;
      bump(g_hits);
      return lookup_slot(*a, s, start, next_ip, prev);
    }
    if (state == kFailed) {
      bump(g_full);
      return Lookup::Full;
    }
    // Being filled by another thread, or a stale entry of an unloaded module at this address.
    return scan_previous(start, end, next_ip, prev);
  }
  bump(g_full);
  return Lookup::Full;
}

unsigned heuristic_previous(const uint8_t* lo, const uint8_t* next) {
  const uint8_t* first = next - lo > kHeuristicWindow ? next - kHeuristicWindow : lo;
  // Chains that reach an offset another chain already decoded from share its future, so each
  // offset is decoded once: seen[] holds the chain that got there first.
  int8_t seen[kHeuristicWindow];
  uint8_t result[kHeuristicStarts];  // per chain: distance back of its last instruction, or 0
  std::memset(seen, -1, sizeof seen);
  unsigned votes[16] = {};
  for (int k = 0; k < kHeuristicStarts && first + k < next; ++k) {
    const uint8_t* p = first + k;
    const uint8_t* last = nullptr;
    int shared = -1;
    while (p < next) {
      int8_t& s = seen[p - first];
      if (s >= 0) {
        shared = s;
        break;
      }
      s = static_cast<int8_t>(k);
      const uint8_t len = length_at(p, static_cast<size_t>(next - p));
      if (len == 0) break;
      last = p;
      p += len;
    }
    result[k] = shared >= 0 ? result[shared] : (p == next && last ? next - last : 0);
    if (result[k]) ++votes[result[k]];
  }
  unsigned best = 0, best_votes = 0, second = 0;
  for (unsigned d = 1; d < 16; ++d) {
    if (votes[d] > best_votes) {
      second = best_votes;
      best_votes = votes[d];
      best = d;
    } else if (votes[d] > second) {
      second = votes[d];
    }
  }
  return best_votes >= kHeuristicMinVotes && best_votes >= 2 * second ? best : 0;
}

CacheCounters cache_counters() {
  return {g_cached.load(std::memory_order_relaxed), g_full.load(std::memory_order_relaxed),
          g_hits.load(std::memory_order_relaxed), g_misses.load(std::memory_order_relaxed)};
}

}  // namespace whymiss::soft::detail
