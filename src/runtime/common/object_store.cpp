// The object store: which live heap object contains address A (CachePerf §3.4's three levels).
//
// Every registered object lives in exactly one level:
//   page level   objects wholly inside one 4 KiB page: listed under that page;
//   chunk level  other objects covering at most kMaxChunkSpan 1 MiB chunks: listed under every
//                chunk they overlap (clipped to it);
//   huge level   the rest (> 4 GiB): one sorted array.
// Page and chunk tables are two-level radix tables over the 47-bit user address space whose
// leaves (2 MiB per GiB of address space for pages, 128 KiB per 16 GiB for chunks) are reserved
// with MAP_NORESERVE on first use and never freed; the top levels are in .bss. A table entry is
// one word: a pointer to a List (count, capacity, items sorted by start) or 0, whose bit 0 is the
// entry's spinlock. A lookup therefore touches the top level (hot), the entry (which it locks
// with one CAS), the list and the object; an address in no page with small objects skips the
// page level without locking.
//
// Locking. An object reachable from only one entry (page level, or chunk level within one chunk)
// is protected by that entry's lock: with_object runs the callback holding it. An object listed
// in several entries (multi) also has its own slot lock, taken (under the entry lock) before the
// callback, so its statistics always change under the same lock whatever chunk the address fell
// in. Removal takes the entry lock(s) to unlink (no callback on a single-entry object can run
// after that), and for a multi object then the slot lock once, which waits out a callback still
// running; only then is the record reused. Lock order: entry -> slot; the huge list's lock plays
// the entry's role for huge objects. Export reads records without locks and skips one that
// changed while being copied. Nothing here allocates from the program's heap: lists come from the
// private heap (an emptied list stays for the next object of its page), records from a fixed
// pool of kMaxSlots (4 Mi live + 256 Ki retired) with per-thread caches.
//
// Retention. A freed object whose statistics show misses (any kind but index 0, Hit) is kept as
// "retired" for the export, up to kMaxRetired; beyond that, and when the pool is full at
// registration, dropped_objects() counts what was lost.
//
// A per-thread guard (t_heap.guard) is set while inside the store: a signal handler that reaches
// with_object or a hook on this thread meanwhile gets "not found" / an unrecorded allocation
// instead of a self-deadlock.
#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>

#include "runtime/common/heap_internal.h"

namespace whymiss::rt {

enum : uint8_t { kSlotFree = 0, kSlotLive = 1, kSlotRetired = 2 };

struct alignas(64) HeapSlot {
  HeapObject obj;
  HeapLock lock;   // multi objects: held by with_object callbacks (see file comment)
  uint8_t state;   // kSlot*, release-stored after the record is complete
  uint8_t multi;   // listed in several entries (or the huge list): callbacks also take `lock`
  HeapSlot* next;  // free-list link
};

namespace {

constexpr int kAddrBits = 47;
constexpr uintptr_t kAddrLimit = uintptr_t{1} << kAddrBits;
constexpr int kPageShift = 12;
constexpr int kChunkShift = 20;
constexpr uint32_t kChunkSize = 1u << kChunkShift;
constexpr int kPageLeafBits = 18;   // a page leaf covers 1 GiB
constexpr int kChunkLeafBits = 14;  // a chunk leaf covers 16 GiB
constexpr int kPageTopBits = kAddrBits - kPageShift - kPageLeafBits;
constexpr int kChunkTopBits = kAddrBits - kChunkShift - kChunkLeafBits;
constexpr uintptr_t kMaxChunkSpan = 4096;  // larger objects (> 4 GiB) go to the huge list
constexpr uint32_t kMaxLive = 1u << 22;
constexpr uint32_t kMaxRetired = 1u << 18;
constexpr uint32_t kMaxSlots = kMaxLive + kMaxRetired;
constexpr int kStripes = 64;
constexpr uint64_t kSerialBlock = 64;

using Entry = std::atomic<uintptr_t>;

struct Item {  // a range inside one chunk: [chunk base + lo, chunk base + hi)
  uint32_t lo, hi;
  HeapSlot* slot;
};
struct List {
  uint32_t count, cap;
  Item* items() noexcept { return reinterpret_cast<Item*>(this + 1); }
};
static_assert(sizeof(List) == 8 && alignof(Item) == 8);

struct HugeItem {
  uintptr_t start, end;
  HeapSlot* slot;
};

struct alignas(64) Stripe {
  HeapLock lock;
  std::atomic<HeapSlot*> head{nullptr};
};

std::atomic<Entry*> g_page_top[size_t{1} << kPageTopBits];
std::atomic<Entry*> g_chunk_top[size_t{1} << kChunkTopBits];

enum : int { kPoolNone = 0, kPoolIniting = 1, kPoolReady = 2, kPoolFailed = 3 };
std::atomic<int> g_pool_state{kPoolNone};
HeapSlot* g_slots = nullptr;
uint32_t g_slot_cap = 0;  // records in g_slots (kMaxSlots unless address space was short)
std::atomic<uint32_t> g_bump{0};
Stripe g_stripes[kStripes];
std::atomic<uint64_t> g_serial{0};
std::atomic<uint32_t> g_retired{0};
std::atomic<uint64_t> g_detaches{0};  // see object_detaches()
std::atomic<uint64_t> g_attaches{0};  // see object_attaches()
std::atomic<uint64_t> g_dropped{0};
std::atomic<bool> g_active{false};    // something was registered: frees must unregister
std::atomic<bool> g_disabled{false};  // forked child: the store is frozen

HeapLock g_huge_lock;
HugeItem* g_huge = nullptr;
size_t g_huge_cap = 0;
std::atomic<size_t> g_huge_count{0};
std::atomic<uintptr_t> g_huge_min{~uintptr_t{0}}, g_huge_max{0};  // hull, for a lock-free reject

inline void drop() noexcept {
  g_dropped.fetch_add(1, std::memory_order_relaxed);
}

// ---- radix tables ----

template <int kLeafBits>
Entry* entry_at(std::atomic<Entry*>* top, uintptr_t index, bool create) noexcept {
  std::atomic<Entry*>& slot = top[index >> kLeafBits];
  Entry* leaf = slot.load(std::memory_order_acquire);
  if (leaf == nullptr) {
    if (!create) return nullptr;
    constexpr size_t kBytes = sizeof(Entry) << kLeafBits;
    auto* fresh = static_cast<Entry*>(reserve_zeroed(kBytes));
    if (fresh == nullptr) return nullptr;
    if (slot.compare_exchange_strong(leaf, fresh, std::memory_order_acq_rel)) {
      leaf = fresh;
    } else {
      munmap(fresh, kBytes);  // lost the race; `leaf` now holds the winner's
    }
  }
  return &leaf[index & ((uintptr_t{1} << kLeafBits) - 1)];
}

inline Entry* page_entry(uintptr_t addr, bool create) noexcept {
  return entry_at<kPageLeafBits>(g_page_top, addr >> kPageShift, create);
}
inline Entry* chunk_entry(uintptr_t chunk, bool create) noexcept {
  return entry_at<kChunkLeafBits>(g_chunk_top, chunk, create);
}

inline void spin_wait(unsigned& spins) noexcept {
  if (++spins < 128) {
    __builtin_ia32_pause();
  } else {
    sched_yield();
  }
}

// Locks an entry (also an empty one) and returns its list (nullptr = none).
List* lock_entry(Entry* e) noexcept {
  for (unsigned spins = 0;; spin_wait(spins)) {
    uintptr_t v = e->load(std::memory_order_relaxed);
    if ((v & 1) == 0 && e->compare_exchange_weak(v, v | 1, std::memory_order_acquire)) {
      return reinterpret_cast<List*>(v);
    }
  }
}

// Locks an entry only if it has a list; returns nullptr (entry not locked) when it has none.
List* lock_entry_if_list(Entry* e) noexcept {
  for (unsigned spins = 0;; spin_wait(spins)) {
    uintptr_t v = e->load(std::memory_order_relaxed);
    if (v == 0) return nullptr;
    if ((v & 1) == 0 && e->compare_exchange_weak(v, v | 1, std::memory_order_acquire)) {
      return reinterpret_cast<List*>(v);
    }
  }
}

inline void unlock_entry(Entry* e, List* l) noexcept {
  e->store(reinterpret_cast<uintptr_t>(l), std::memory_order_release);
}

// How many items start at or before chunk offset `off` (items are sorted by start).
inline uint32_t items_from(List* l, uint32_t off) noexcept {
  const Item* it = l->items();
  uint32_t lo = 0, hi = l->count;
  while (lo < hi) {  // first item with lo > off
    const uint32_t mid = (lo + hi) / 2;
    if (it[mid].lo <= off) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Index of the item containing chunk offset `off`, or -1. Items never overlap.
inline int find_item(List* l, uint32_t off) noexcept {
  const uint32_t n = items_from(l, off);
  return n > 0 && off < l->items()[n - 1].hi ? static_cast<int>(n - 1) : -1;
}

// Removes item i. An emptied list is kept (and reused by the next insert): programs that
// allocate and free one object at a time would otherwise pay a list allocation per malloc.
List* remove_item(List* l, int i) noexcept {
  Item* it = l->items();
  memmove(&it[i], &it[i + 1], (l->count - i - 1) * sizeof(Item));
  --l->count;
  return l;
}

// Inserts `item` under entry e. When `evict` is set (page level, whose objects are listed nowhere
// else), items overlapping the new one are stale records of blocks freed behind our back: they
// are unlinked and handed back in evicted[] (at most kMaxEvict; more are simply unlinked).
constexpr int kMaxEvict = 8;
bool insert_item(Entry* e, Item item, bool evict, HeapSlot** evicted, int* n_evicted) noexcept {
  List* l = lock_entry(e);
  uint32_t pos = 0;  // first item with lo > item.lo (typically the end: addresses grow)
  if (l != nullptr) {
    Item* it = l->items();
    pos = l->count;
    if (pos > 0 && it[pos - 1].lo > item.lo) {
      uint32_t lo = 0, hi = pos;
      while (lo < hi) {
        const uint32_t mid = (lo + hi) / 2;
        if (it[mid].lo <= item.lo) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      pos = lo;
    }
    if (evict) {  // items are disjoint and sorted, so the overlapping ones are contiguous
      uint32_t a = pos, b = pos;
      while (a > 0 && it[a - 1].hi > item.lo) --a;
      while (b < l->count && it[b].lo < item.hi) ++b;
      if (a < b) {
        for (uint32_t k = a; k < b && *n_evicted < kMaxEvict; ++k) {
          evicted[(*n_evicted)++] = it[k].slot;
        }
        memmove(&it[a], &it[b], (l->count - b) * sizeof(Item));
        l->count -= b - a;
        pos = a;
      }
    }
  }
  if (l == nullptr || l->count == l->cap) {
    const uint32_t cap = l == nullptr ? 2 : l->cap * 2;
    auto* nl = static_cast<List*>(private_alloc(sizeof(List) + cap * sizeof(Item)));
    if (nl == nullptr) {
      unlock_entry(e, l);
      return false;
    }
    nl->count = 0;
    nl->cap = cap;
    if (l != nullptr) {
      memcpy(nl->items(), l->items(), l->count * sizeof(Item));
      nl->count = l->count;
      private_free(l);
    }
    l = nl;
  }
  Item* it = l->items();
  memmove(&it[pos + 1], &it[pos], (l->count - pos) * sizeof(Item));
  it[pos] = item;
  ++l->count;
  unlock_entry(e, l);
  return true;
}

// Unlinks `slot`'s item containing chunk offset `off` from entry e; false if absent.
bool unlink_item(Entry* e, uint32_t off, HeapSlot* slot) noexcept {
  if (e == nullptr) return false;
  List* l = lock_entry_if_list(e);
  if (l == nullptr) return false;
  const int i = find_item(l, off);
  const bool found = i >= 0 && l->items()[i].slot == slot;
  if (found) l = remove_item(l, i);
  unlock_entry(e, l);
  return found;
}

inline uint32_t chunk_off(uintptr_t a) noexcept {
  return static_cast<uint32_t>(a & (kChunkSize - 1));
}

// ---- huge list (g_huge_lock held) ----

size_t huge_lower_bound(uintptr_t start) noexcept {  // first item with start >= `start`
  size_t lo = 0, hi = g_huge_count.load(std::memory_order_relaxed);
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (g_huge[mid].start < start) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Index of the huge item containing addr, or -1.
long huge_find(uintptr_t addr) noexcept {
  const size_t i = huge_lower_bound(addr + 1);  // first start > addr
  if (i == 0) return -1;
  return addr < g_huge[i - 1].end ? static_cast<long>(i - 1) : -1;
}

void huge_update_hull() noexcept {
  const size_t n = g_huge_count.load(std::memory_order_relaxed);
  uintptr_t mn = ~uintptr_t{0}, mx = 0;
  for (size_t i = 0; i < n; ++i) {
    if (g_huge[i].start < mn) mn = g_huge[i].start;
    if (g_huge[i].end > mx) mx = g_huge[i].end;
  }
  g_huge_min.store(mn, std::memory_order_relaxed);
  g_huge_max.store(mx, std::memory_order_relaxed);
}

bool huge_insert(HeapSlot* slot) noexcept {
  const uintptr_t start = slot->obj.start;
  g_huge_lock.lock();
  const size_t n = g_huge_count.load(std::memory_order_relaxed);
  if (n == g_huge_cap) {
    const size_t cap = g_huge_cap == 0 ? 16 : g_huge_cap * 2;
    auto* fresh = static_cast<HugeItem*>(private_alloc(cap * sizeof(HugeItem)));
    if (fresh == nullptr) {
      g_huge_lock.unlock();
      return false;
    }
    if (n > 0) memcpy(fresh, g_huge, n * sizeof(HugeItem));
    private_free(g_huge);
    g_huge = fresh;
    g_huge_cap = cap;
  }
  const size_t pos = huge_lower_bound(start);
  memmove(&g_huge[pos + 1], &g_huge[pos], (n - pos) * sizeof(HugeItem));
  g_huge[pos] = HugeItem{start, start + slot->obj.size, slot};
  g_huge_count.store(n + 1, std::memory_order_relaxed);
  huge_update_hull();
  g_huge_lock.unlock();
  return true;
}

// ---- record pool ----
//
// Records come from one array of kMaxSlots (reserved on first use; a quarter, then a sixteenth,
// if the address space is limited). Free records are cached per
// thread (up to 2 * kBatch, in t_heap) so that a malloc/free pair needs no atomic operation for
// its record; batches of kBatch move between the thread caches, 64 locked stripes (a thread's
// home stripe is its index mod 64) and the never-used tail of the array (g_bump). A thread's cache
// goes back to its stripe when the thread exits (pthread key destructor); a thread that frees but
// never allocates, or is exiting, uses the stripes directly.

constexpr uint32_t kBatch = 32;
pthread_key_t g_exit_key;
bool g_exit_key_ok = false;
std::atomic<uint64_t> g_in_stripes{0};  // records parked in stripes (to skip useless scans)

enum : uint8_t { kCacheUnset = 0, kCacheOn = 1, kCacheOff = 2 };

void flush_cache(HeapSlot* head, uint32_t n, uint32_t stripe) noexcept {
  if (head == nullptr) return;
  HeapSlot* tail = head;
  while (tail->next != nullptr) tail = tail->next;
  Stripe& st = g_stripes[stripe % kStripes];
  st.lock.lock();
  tail->next = st.head.load(std::memory_order_relaxed);
  st.head.store(head, std::memory_order_relaxed);
  st.lock.unlock();
  g_in_stripes.fetch_add(n, std::memory_order_relaxed);
}

void on_thread_exit(void*) {
  ThreadHeapState& t = t_heap;
  HeapGuard guard;
  t.cache_state = kCacheOff;
  HeapSlot* head = t.slot_cache;
  const uint32_t n = t.slot_cached;
  t.slot_cache = nullptr;
  t.slot_cached = 0;
  flush_cache(head, n, t.stripe);
}

// Creates the pool on first use. Another thread creating it is waited for (one mmap); the
// creating thread cannot re-enter here because it runs under HeapGuard.
bool pool_ready() noexcept {
  for (unsigned spins = 0;; spin_wait(spins)) {
    int s = g_pool_state.load(std::memory_order_acquire);
    if (s == kPoolReady) return true;
    if (s == kPoolFailed) return false;
    if (s == kPoolNone &&
        g_pool_state.compare_exchange_strong(s, kPoolIniting, std::memory_order_acquire)) {
      for (uint32_t cap = kMaxSlots; g_slots == nullptr && cap >= kMaxSlots / 16; cap /= 4) {
        g_slots = static_cast<HeapSlot*>(reserve_zeroed(sizeof(HeapSlot) * size_t{cap}));
        g_slot_cap = cap;
      }
      g_exit_key_ok = pthread_key_create(&g_exit_key, on_thread_exit) == 0;
      g_pool_state.store(g_slots != nullptr ? kPoolReady : kPoolFailed, std::memory_order_release);
      return g_slots != nullptr;
    }
  }
}

// Takes up to `max` records from a stripe as a chain; returns the head, *n = count.
HeapSlot* take(Stripe& st, uint32_t max, uint32_t* n) noexcept {
  *n = 0;
  if (st.head.load(std::memory_order_relaxed) == nullptr) return nullptr;
  st.lock.lock();
  HeapSlot* head = st.head.load(std::memory_order_relaxed);
  HeapSlot* last = nullptr;
  for (HeapSlot* s = head; s != nullptr && *n < max; s = s->next) {
    last = s;
    ++*n;
  }
  if (last != nullptr) {
    st.head.store(last->next, std::memory_order_relaxed);
    last->next = nullptr;
  }
  st.lock.unlock();
  if (*n > 0) g_in_stripes.fetch_sub(*n, std::memory_order_relaxed);
  return head;
}

// A chain of up to `max` free records: the home stripe, then (if any are parked) the other
// stripes (producer/consumer programs free on other threads than they allocate), then fresh ones.
HeapSlot* refill(uint32_t stripe, uint32_t max, uint32_t* n) noexcept {
  if (HeapSlot* h = take(g_stripes[stripe % kStripes], max, n)) return h;
  if (g_in_stripes.load(std::memory_order_relaxed) >= max) {
    for (uint32_t k = 1; k < kStripes; ++k) {
      if (HeapSlot* h = take(g_stripes[(stripe + k) % kStripes], max, n)) return h;
    }
  }
  if (g_bump.load(std::memory_order_relaxed) < g_slot_cap) {
    const uint32_t i = g_bump.fetch_add(max, std::memory_order_relaxed);
    if (i < g_slot_cap) {
      *n = max < g_slot_cap - i ? max : g_slot_cap - i;
      for (uint32_t k = 0; k + 1 < *n; ++k) g_slots[i + k].next = &g_slots[i + k + 1];
      g_slots[i + *n - 1].next = nullptr;
      return &g_slots[i];
    }
  }
  for (uint32_t k = 1; k < kStripes; ++k) {  // pool exhausted: take whatever is parked
    if (HeapSlot* h = take(g_stripes[(stripe + k) % kStripes], max, n)) return h;
  }
  return nullptr;
}

HeapSlot* alloc_slot(uint32_t thread) noexcept {
  ThreadHeapState& t = t_heap;
  if (t.cache_state == kCacheUnset) {
    t.stripe = thread % kStripes;
    // The key's value only has to be non-null for the destructor to run.
    const bool on = g_exit_key_ok && pthread_setspecific(g_exit_key, &t) == 0;
    t.cache_state = on ? kCacheOn : kCacheOff;
  }
  if (t.cache_state != kCacheOn) {
    uint32_t n;
    return refill(thread, 1, &n);
  }
  if (t.slot_cache == nullptr) {
    t.slot_cache = refill(t.stripe, kBatch, &t.slot_cached);
    if (t.slot_cache == nullptr) return nullptr;
  }
  HeapSlot* s = t.slot_cache;
  t.slot_cache = s->next;
  --t.slot_cached;
  return s;
}

// Recycles a record nobody can reach any more (state already kSlotFree).
void recycle(HeapSlot* s) noexcept {
  ThreadHeapState& t = t_heap;
  if (t.cache_state != kCacheOn) {
    s->next = nullptr;
    flush_cache(s, 1, t.cache_state == kCacheUnset ? s->obj.alloc_thread : t.stripe);
    return;
  }
  s->next = t.slot_cache;
  t.slot_cache = s;
  if (++t.slot_cached >= 2 * kBatch) {  // keep kBatch, park the rest
    HeapSlot* cut = s;
    for (uint32_t k = 1; k < kBatch; ++k) cut = cut->next;
    HeapSlot* rest = cut->next;
    cut->next = nullptr;
    flush_cache(rest, t.slot_cached - kBatch, t.stripe);
    t.slot_cached = kBatch;
  }
}

bool index_insert_unversioned(HeapSlot* slot) noexcept {
  const uintptr_t start = slot->obj.start;
  const uintptr_t last = start + slot->obj.size - 1;
  if ((start >> kPageShift) == (last >> kPageShift)) {
    slot->multi = 0;
    Entry* e = page_entry(start, true);
    if (e == nullptr) return false;
    HeapSlot* evicted[kMaxEvict];
    int n_evicted = 0;
    const bool ok = insert_item(e, Item{chunk_off(start), chunk_off(last) + 1, slot}, true, evicted,
                                &n_evicted);
    // (Records it took off stop being live too: callers that keep one while this count holds
    // must see the change before the record is reused.)
    if (n_evicted > 0) g_detaches.fetch_add(1, std::memory_order_release);
    for (int i = 0; i < n_evicted; ++i) store_release(evicted[i]);
    return ok;
  }
  const uintptr_t c0 = start >> kChunkShift, c1 = last >> kChunkShift;
  if (c1 - c0 >= kMaxChunkSpan) {
    slot->multi = 1;
    return huge_insert(slot);
  }
  slot->multi = c1 != c0;
  for (uintptr_t c = c0; c <= c1; ++c) {
    const uint32_t lo = c == c0 ? chunk_off(start) : 0;
    const uint32_t hi = c == c1 ? chunk_off(last) + 1 : kChunkSize;
    Entry* e = chunk_entry(c, true);
    if (e == nullptr || !insert_item(e, Item{lo, hi, slot}, false, nullptr, nullptr)) {
      for (uintptr_t u = c0; u < c; ++u) {
        unlink_item(chunk_entry(u, false), u == c0 ? chunk_off(start) : 0, slot);
      }
      return false;
    }
  }
  return true;
}

// Counted after the object is findable, so that a "no object here" learnt before it was (see
// object_attaches) is stale by the time anyone can touch the object.
bool index_insert(HeapSlot* slot) noexcept {
  const bool ok = index_insert_unversioned(slot);
  g_attaches.fetch_add(1, std::memory_order_release);
  return ok;
}

// Unlinks the object starting exactly at `start`; returns it or nullptr.
HeapSlot* index_remove(uintptr_t start) noexcept {
  const uint32_t off = chunk_off(start);
  if (Entry* e = page_entry(start, false)) {
    if (List* l = lock_entry_if_list(e)) {
      const int i = find_item(l, off);
      HeapSlot* s = nullptr;
      if (i >= 0 && l->items()[i].lo == off && l->items()[i].slot->obj.start == start) {
        s = l->items()[i].slot;
        l = remove_item(l, i);
      }
      unlock_entry(e, l);
      if (s != nullptr) return s;
    }
  }
  const uintptr_t c0 = start >> kChunkShift;
  if (Entry* e = chunk_entry(c0, false)) {
    if (List* l = lock_entry_if_list(e)) {
      const int i = find_item(l, off);
      HeapSlot* s = nullptr;
      if (i >= 0 && l->items()[i].lo == off && l->items()[i].slot->obj.start == start) {
        s = l->items()[i].slot;
        l = remove_item(l, i);
      }
      unlock_entry(e, l);
      if (s != nullptr) {
        const uintptr_t c1 = (start + s->obj.size - 1) >> kChunkShift;
        for (uintptr_t c = c0 + 1; c <= c1; ++c) unlink_item(chunk_entry(c, false), 0, s);
        return s;
      }
    }
  }
  if (g_huge_count.load(std::memory_order_relaxed) == 0) return nullptr;
  HeapSlot* s = nullptr;
  g_huge_lock.lock();
  const size_t i = huge_lower_bound(start);
  const size_t n = g_huge_count.load(std::memory_order_relaxed);
  if (i < n && g_huge[i].start == start) {
    s = g_huge[i].slot;
    memmove(&g_huge[i], &g_huge[i + 1], (n - i - 1) * sizeof(HugeItem));
    g_huge_count.store(n - 1, std::memory_order_relaxed);
    huge_update_hull();
  }
  g_huge_lock.unlock();
  return s;
}

inline bool usable() noexcept {
  return g_active.load(std::memory_order_relaxed) && !g_disabled.load(std::memory_order_relaxed);
}

void copy_out(const HeapSlot& s, profile::ObjectRecord* r) noexcept {
  const HeapObject& o = s.obj;
  memset(r, 0, sizeof(*r));
  r->serial = __atomic_load_n(&o.serial, __ATOMIC_RELAXED);
  r->start = __atomic_load_n(&o.start, __ATOMIC_RELAXED);
  r->size = __atomic_load_n(&o.size, __ATOMIC_RELAXED);
  r->alloc_thread = __atomic_load_n(&o.alloc_thread, __ATOMIC_RELAXED);
  r->site = __atomic_load_n(&o.site, __ATOMIC_RELAXED);
  for (int k = 0; k < profile::kKinds; ++k) {
    r->misses[k] = __atomic_load_n(&o.misses[k], __ATOMIC_RELAXED);
  }
  r->thread_mask = __atomic_load_n(&o.thread_mask, __ATOMIC_RELAXED);
  r->l1_set_mask = __atomic_load_n(&o.l1_set_mask, __ATOMIC_RELAXED);
  const uint64_t self = __atomic_load_n(&o.self_conflicts, __ATOMIC_RELAXED);
  r->self_conflicts = self > UINT32_MAX ? UINT32_MAX : uint32_t(self);
}

// Calls f(record) with a consistent copy of every record that is live or retired; stops when f
// returns false. Lock-free: a record recycled or reused while being copied (its state or serial
// changed) is skipped. Records registered meanwhile may be missed.
template <typename F>
void for_each_record(F&& f) noexcept {
  if (g_pool_state.load(std::memory_order_acquire) != kPoolReady) return;
  uint32_t n = g_bump.load(std::memory_order_acquire);
  if (n > g_slot_cap) n = g_slot_cap;
  for (uint32_t i = 0; i < n; ++i) {
    HeapSlot& s = g_slots[i];
    const uint8_t state = __atomic_load_n(&s.state, __ATOMIC_ACQUIRE);
    if (state == kSlotFree) continue;
    const uint64_t serial = __atomic_load_n(&s.obj.serial, __ATOMIC_ACQUIRE);
    profile::ObjectRecord r;
    copy_out(s, &r);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (__atomic_load_n(&s.obj.serial, __ATOMIC_RELAXED) != serial || r.serial != serial ||
        __atomic_load_n(&s.state, __ATOMIC_RELAXED) != state) {
      continue;
    }
    r.freed = state == kSlotRetired ? 1 : 0;
    if (!f(r)) return;
  }
}

}  // namespace

// ---- internal API ----

bool store_active() noexcept {
  return usable();
}

void store_register(uintptr_t start, size_t size, uint32_t thread, uint32_t site) noexcept {
  if (size == 0 || g_disabled.load(std::memory_order_relaxed)) return;
  if (start >= kAddrLimit || size > kAddrLimit - start || !pool_ready()) {
    drop();
    return;
  }
  HeapSlot* s = alloc_slot(thread);
  if (s == nullptr) {
    drop();
    return;
  }
  // Serials come from the global counter in blocks of kSerialBlock per thread, so that threads
  // allocating concurrently do not bounce its cache line on every malloc: unique, increasing per
  // thread, and in allocation order across threads to within a block.
  ThreadHeapState& t = t_heap;
  if (t.serial_next == t.serial_end) {
    t.serial_next = g_serial.fetch_add(kSerialBlock, std::memory_order_relaxed) + 1;
    t.serial_end = t.serial_next + kSerialBlock;
  }
  HeapObject& o = s->obj;
  memset(&o, 0, sizeof(o));
  o.serial = t.serial_next++;  // serials start at 1
  o.start = start;
  o.size = size;
  o.alloc_thread = thread;
  o.site = site;
  s->next = nullptr;
  __atomic_store_n(&s->state, kSlotLive, __ATOMIC_RELEASE);
  if (!g_active.load(std::memory_order_relaxed)) g_active.store(true, std::memory_order_relaxed);
  if (!index_insert(s)) {
    __atomic_store_n(&s->state, kSlotFree, __ATOMIC_RELEASE);
    recycle(s);
    drop();
  }
}

HeapSlot* store_detach(uintptr_t start) noexcept {
  if (!usable() || start >= kAddrLimit) return nullptr;
  HeapSlot* s = index_remove(start);
  if (s != nullptr) g_detaches.fetch_add(1, std::memory_order_release);
  if (s != nullptr && s->multi) {
    // Callbacks on a multi object run under its slot lock, after the entry lock was dropped:
    // wait for one still running. (Other objects' callbacks run under the entry lock we held.)
    s->lock.lock();
    s->lock.unlock();
  }
  return s;
}

void store_release(HeapSlot* s) noexcept {
  if (s == nullptr) return;
  // Detached: no callback runs on it any more, so its statistics are final.
  if (has_misses(s->obj)) {
    if (g_retired.load(std::memory_order_relaxed) < kMaxRetired &&
        g_retired.fetch_add(1, std::memory_order_relaxed) < kMaxRetired) {
      __atomic_store_n(&s->state, kSlotRetired, __ATOMIC_RELEASE);
      return;
    }
    drop();  // retired list full: this object's misses are lost
  }
  __atomic_store_n(&s->state, kSlotFree, __ATOMIC_RELEASE);
  recycle(s);
}

void store_reattach(HeapSlot* s) noexcept {
  if (s == nullptr) return;
  if (!index_insert(s)) {
    drop();
    __atomic_store_n(&s->state, kSlotFree, __ATOMIC_RELEASE);
    recycle(s);
  }
}

void store_after_fork_child() noexcept {
  // Entry locks held by threads that do not exist in the child would block forever, and the
  // child does not record: freeze the store (no lookups, no unregistering).
  g_disabled.store(true, std::memory_order_relaxed);
  g_huge_lock.reset();
  for (Stripe& st : g_stripes) st.lock.reset();
}

// ---- heap.h ----

uint64_t object_detaches() noexcept { return g_detaches.load(std::memory_order_acquire); }
uint64_t object_attaches() noexcept { return g_attaches.load(std::memory_order_acquire); }

namespace {
// Whether the entry lists an item overlapping chunk offsets [a, b), a < b. Items are sorted and
// disjoint, so the last one starting before b is the only candidate.
bool entry_overlaps(Entry* e, uint32_t a, uint32_t b) noexcept {
  if (e == nullptr) return false;
  List* l = lock_entry_if_list(e);
  if (l == nullptr) return false;
  const uint32_t n = items_from(l, b - 1);
  const bool hit = n > 0 && l->items()[n - 1].hi > a;
  unlock_entry(e, l);
  return hit;
}
}  // namespace

bool page_without_objects(uintptr_t addr) noexcept {
  if (!usable() || t_heap.guard || addr >= kAddrLimit) return false;
  HeapGuard guard;
  const uintptr_t page = addr & ~((uintptr_t{1} << kPageShift) - 1);
  const uint32_t a = chunk_off(page), b = a + (uint32_t{1} << kPageShift);
  if (entry_overlaps(page_entry(page, false), a, b)) return false;
  if (entry_overlaps(chunk_entry(page >> kChunkShift, false), a, b)) return false;
  if (g_huge_count.load(std::memory_order_acquire) != 0) {
    g_huge_lock.lock();
    const bool any = g_huge_count.load(std::memory_order_relaxed) != 0 &&
                     page < g_huge_max.load(std::memory_order_relaxed) &&
                     page + (uintptr_t{1} << kPageShift) > g_huge_min.load(std::memory_order_relaxed);
    g_huge_lock.unlock();
    if (any) return false;  // (inside the hull of the huge objects: not worth a closer look)
  }
  return true;
}

bool with_object(uintptr_t addr, void (*fn)(HeapObject&, void*), void* arg) noexcept {
  if (!usable() || t_heap.guard || addr >= kAddrLimit) return false;
  HeapGuard guard;
  const uint32_t off = chunk_off(addr);
  if (Entry* e = page_entry(addr, false)) {
    if (List* l = lock_entry_if_list(e)) {
      const int i = find_item(l, off);
      if (i >= 0) {
        fn(l->items()[i].slot->obj, arg);
        unlock_entry(e, l);
        return true;
      }
      unlock_entry(e, l);
    }
  }
  if (Entry* e = chunk_entry(addr >> kChunkShift, false)) {
    if (List* l = lock_entry_if_list(e)) {
      const int i = find_item(l, off);
      if (i >= 0) {
        HeapSlot* s = l->items()[i].slot;
        if (!s->multi) {
          fn(s->obj, arg);
          unlock_entry(e, l);
        } else {
          s->lock.lock();
          unlock_entry(e, l);
          fn(s->obj, arg);
          s->lock.unlock();
        }
        return true;
      }
      unlock_entry(e, l);
    }
  }
  if (g_huge_count.load(std::memory_order_relaxed) != 0 &&
      addr >= g_huge_min.load(std::memory_order_relaxed) &&
      addr < g_huge_max.load(std::memory_order_relaxed)) {
    g_huge_lock.lock();
    const long i = huge_find(addr);
    if (i >= 0) {
      HeapSlot* s = g_huge[i].slot;
      s->lock.lock();
      g_huge_lock.unlock();
      fn(s->obj, arg);
      s->lock.unlock();
      return true;
    }
    g_huge_lock.unlock();
  }
  return false;
}

int objects_overlapping(uintptr_t lo, uintptr_t hi, HeapObject* out, int max) noexcept {
  if (!usable() || t_heap.guard || lo >= hi || lo >= kAddrLimit) return 0;
  if (hi > kAddrLimit) hi = kAddrLimit;
  HeapGuard guard;
  int found = 0;
  auto emit = [&](HeapSlot* s) {
    if (found < max) {
      if (s->multi) s->lock.lock();
      out[found] = s->obj;
      if (s->multi) s->lock.unlock();
    }
    ++found;
  };
  // Page level: every page of the range (whole 1 GiB leaves without a table are skipped).
  const uintptr_t p_end = ((hi - 1) >> kPageShift) + 1;
  for (uintptr_t p = lo >> kPageShift; p < p_end;) {
    if (g_page_top[p >> kPageLeafBits].load(std::memory_order_acquire) == nullptr) {
      p = ((p >> kPageLeafBits) + 1) << kPageLeafBits;
      continue;
    }
    Entry* e = page_entry(p << kPageShift, false);
    if (List* l = lock_entry_if_list(e)) {
      const uintptr_t base = (p << kPageShift) & ~uintptr_t{kChunkSize - 1};
      for (uint32_t i = 0; i < l->count; ++i) {
        const Item& it = l->items()[i];
        if (base + it.lo < hi && lo < base + it.hi) emit(it.slot);
      }
      unlock_entry(e, l);
    }
    ++p;
  }
  // Chunk level: an object listed under several chunks is reported from the first chunk of the
  // range it overlaps.
  const uintptr_t c_end = ((hi - 1) >> kChunkShift) + 1;
  for (uintptr_t c = lo >> kChunkShift; c < c_end;) {
    if (g_chunk_top[c >> kChunkLeafBits].load(std::memory_order_acquire) == nullptr) {
      c = ((c >> kChunkLeafBits) + 1) << kChunkLeafBits;
      continue;
    }
    Entry* e = chunk_entry(c, false);
    if (List* l = lock_entry_if_list(e)) {
      const uintptr_t base = c << kChunkShift;
      for (uint32_t i = 0; i < l->count; ++i) {
        const Item& it = l->items()[i];
        if (!(base + it.lo < hi && lo < base + it.hi)) continue;
        const uintptr_t first = it.slot->obj.start > lo ? it.slot->obj.start : lo;
        if ((first >> kChunkShift) == c) emit(it.slot);
      }
      unlock_entry(e, l);
    }
    ++c;
  }
  if (g_huge_count.load(std::memory_order_relaxed) != 0) {
    g_huge_lock.lock();
    const size_t n = g_huge_count.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i) {
      if (g_huge[i].start < hi && lo < g_huge[i].end) emit(g_huge[i].slot);
    }
    g_huge_lock.unlock();
  }
  return found;
}

size_t export_objects(profile::ObjectRecord* out, size_t max) noexcept {
  size_t k = 0;
  HeapGuard guard;
  for_each_record([&](const profile::ObjectRecord& r) {
    if (k >= max) return false;
    uint64_t sum = 0;
    for (int i = 1; i < profile::kKinds; ++i) sum += r.misses[i];
    if (sum != 0) out[k++] = r;
    return true;
  });
  return k;
}

size_t object_count_with_misses() noexcept {
  size_t n = 0;
  HeapGuard guard;
  for_each_record([&](const profile::ObjectRecord& r) {
    uint64_t sum = 0;
    for (int i = 1; i < profile::kKinds; ++i) sum += r.misses[i];
    n += sum != 0;
    return true;
  });
  // Other threads may still be adding misses: leave room for objects crossing the line.
  return n + n / 8 + 64;
}

uint64_t dropped_objects() noexcept {
  return g_dropped.load(std::memory_order_relaxed);
}

void heap_before_fork() noexcept {
  dtv_before_fork();
  private_heap_before_fork();
}

void heap_after_fork_parent() noexcept {
  private_heap_after_fork_parent();
  dtv_after_fork_parent();
}

void heap_after_fork_child() noexcept {
  private_heap_after_fork_child();
  dtv_after_fork_child();
  sites_after_fork_child();
  store_after_fork_child();
}

}  // namespace whymiss::rt
