// The private heap: memory for the runtime's own data, never from the program's allocator, so
// the runtime's allocations do not land between the program's objects (ARCHITECTURE.md, rules of
// the injected runtime; CachePerf §4.3).
//
// Layout. One region of address space is reserved on first use (64 GiB, MAP_NORESERVE: pages
// are committed only when touched; smaller sizes are tried if the reservation fails) and cut
// into 32 equal slices:
//   slice c (c = 0..16)   size class c: blocks of 16 << c bytes (16 B .. 1 MiB), carved by a bump
//                         pointer, recycled through an intrusive free list. A block's class is
//                         implied by its address, so blocks need no header, and every block is
//                         aligned to its own size (the region base is 1 MiB-aligned).
//   slices 17..31         "big" blocks (> 1 MiB, or when a class slice is exhausted): page
//                         granular, a one-page header before the payload, freed extents kept in a
//                         sorted array and reused first-fit, their pages returned with
//                         MADV_DONTNEED. If that area is exhausted, big blocks get their own mmap
//                         ("fallback" mappings, tracked in a small table).
// is_private() is therefore one range check (plus a scan of the fallback table, which is empty
// unless the runtime has used tens of GiB).
//
// Locking: one spinlock per size class and one for the big area. t_heap.holding marks a thread
// inside any of these critical sections; if a signal handler on that thread calls private_alloc
// (it must not, but the runtime's handlers reach malloc only by mistake) it gets nullptr instead
// of a deadlock, and private_free leaks the block instead of deadlocking.
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "runtime/common/heap_internal.h"

namespace whymiss::rt {

__thread ThreadHeapState t_heap __attribute__((tls_model("initial-exec")));

namespace {

constexpr int kMinShift = 4;   // 16 B
constexpr int kMaxShift = 20;  // 1 MiB
constexpr int kClasses = kMaxShift - kMinShift + 1;
constexpr int kSlices = 32;
constexpr size_t kPage = 4096;
constexpr size_t kBigHeader = kPage;  // header page in front of every big payload
constexpr uint64_t kBigMagic = 0x5748594d49535342ull;
constexpr size_t kMaxExtents = 1024;
constexpr int kMaxFallback = 256;
constexpr size_t kMaxRequest = size_t{1} << 46;  // anything larger cannot be satisfied anyway

struct BigHeader {  // at payload - kBigHeader
  uint64_t magic;
  uintptr_t block;  // start of the whole block (<= header)
  size_t len;       // bytes of the whole block, page multiple
};

struct alignas(64) SizeClass {
  HeapLock lock;
  void* free_head;  // intrusive list: first word of a free block points to the next
  uintptr_t bump, end;
};

struct Extent {
  uintptr_t start;
  size_t len;
};

// Region geometry: written once by init (before g_state becomes kReady), read-only afterwards.
std::atomic<uintptr_t> g_lo{0}, g_hi{0};
uintptr_t g_big_lo = 0;
int g_slice_shift = 0;

enum : int { kUninit = 0, kIniting = 1, kReady = 2, kFailed = 3 };
std::atomic<int> g_state{kUninit};

SizeClass g_class[kClasses];

HeapLock g_big_lock;  // guards the big area and the fallback table
uintptr_t g_big_bump = 0;
Extent g_extents[kMaxExtents];  // free extents of the big area, sorted by start, coalesced
size_t g_extent_count = 0;
Extent g_fallback[kMaxFallback];
std::atomic<int> g_fallback_count{0};

inline uintptr_t round_up(uintptr_t v, uintptr_t a) {
  return (v + a - 1) & ~(a - 1);
}

// Marks this thread as inside a private-heap critical section for the scope.
struct Holding {
  Holding() noexcept {
    t_heap.holding = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  ~Holding() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_heap.holding = 0;
  }
};

bool init_region() noexcept {
  for (;;) {
    int s = g_state.load(std::memory_order_acquire);
    if (s == kReady) return true;
    if (s == kFailed) return false;
    if (s == kUninit && g_state.compare_exchange_strong(s, kIniting, std::memory_order_acquire)) {
      break;
    }
    if (t_heap.holding) return false;  // we are the initialiser, re-entered from a signal
    __builtin_ia32_pause();
  }
  const int saved = errno;
  // 64 GiB down to 512 MiB: a process with RLIMIT_AS or strict overcommit gets a smaller heap.
  for (size_t size = size_t{64} << 30; size >= (size_t{512} << 20); size >>= 1) {
    const size_t slack = size_t{1} << kMaxShift;
    void* m = mmap(nullptr, size + slack, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) continue;
    const uintptr_t lo = round_up(reinterpret_cast<uintptr_t>(m), slack);
    const size_t slice = size / kSlices;
    g_slice_shift = __builtin_ctzll(slice);
    for (int c = 0; c < kClasses; ++c) {
      g_class[c].free_head = nullptr;
      g_class[c].bump = lo + c * slice;
      g_class[c].end = lo + (c + 1) * slice;
    }
    g_big_lo = lo + kClasses * slice;
    g_big_bump = g_big_lo;
    // Big blocks are the simulator's tables (tags, shadows: tens of MiB, read at random): with
    // 4 KiB pages nearly every access to them is also a TLB miss. Where THP is "madvise" (the
    // Debian default), ask for huge pages there; it changes nothing if THP is off.
    madvise(reinterpret_cast<void*>(g_big_lo), lo + size - g_big_lo, MADV_HUGEPAGE);
    g_lo.store(lo, std::memory_order_relaxed);
    g_hi.store(lo + size, std::memory_order_relaxed);
    g_state.store(kReady, std::memory_order_release);
    errno = saved;
    return true;
  }
  g_state.store(kFailed, std::memory_order_release);
  errno = saved;
  return false;
}

inline bool ready() noexcept {
  return g_state.load(std::memory_order_acquire) == kReady || init_region();
}

inline int class_of(size_t size) noexcept {
  if (size <= (size_t{1} << kMinShift)) return 0;
  return (64 - __builtin_clzll(size - 1)) - kMinShift;
}

// ---- big area ----

// Takes `len` bytes (page multiple) from the big area; 0 when it has no room. Lock held.
uintptr_t big_take(size_t len) noexcept {
  for (size_t i = 0; i < g_extent_count; ++i) {
    Extent& e = g_extents[i];
    if (e.len < len) continue;
    const uintptr_t start = e.start;
    if (e.len == len) {
      memmove(&g_extents[i], &g_extents[i + 1], (g_extent_count - i - 1) * sizeof(Extent));
      --g_extent_count;
    } else {
      e.start += len;
      e.len -= len;
    }
    return start;
  }
  const uintptr_t hi = g_hi.load(std::memory_order_relaxed);
  if (hi - g_big_bump < len) return 0;
  const uintptr_t start = g_big_bump;
  g_big_bump += len;
  return start;
}

// Returns [start, start+len) to the big area. Lock held.
void big_give(uintptr_t start, size_t len) noexcept {
  size_t i = 0;
  while (i < g_extent_count && g_extents[i].start < start) ++i;
  const bool merge_prev = i > 0 && g_extents[i - 1].start + g_extents[i - 1].len == start;
  const bool merge_next = i < g_extent_count && start + len == g_extents[i].start;
  if (merge_prev && merge_next) {
    g_extents[i - 1].len += len + g_extents[i].len;
    memmove(&g_extents[i], &g_extents[i + 1], (g_extent_count - i - 1) * sizeof(Extent));
    --g_extent_count;
    --i;
  } else if (merge_prev) {
    g_extents[--i].len += len;
  } else if (merge_next) {
    g_extents[i].start = start;
    g_extents[i].len += len;
  } else if (start + len == g_big_bump) {
    g_big_bump = start;
    return;
  } else if (g_extent_count < kMaxExtents) {
    memmove(&g_extents[i + 1], &g_extents[i], (g_extent_count - i) * sizeof(Extent));
    g_extents[i] = Extent{start, len};
    ++g_extent_count;
  } else {
    return;  // table full: the address space is leaked, the pages were already released
  }
  // The extent at i may now end at the bump pointer: give it back to the bump.
  if (g_extents[i].start + g_extents[i].len == g_big_bump) {
    g_big_bump = g_extents[i].start;
    memmove(&g_extents[i], &g_extents[i + 1], (g_extent_count - i - 1) * sizeof(Extent));
    --g_extent_count;
  }
}

void* big_alloc(size_t size, size_t align) noexcept {
  if (size > kMaxRequest || align > kMaxRequest) return nullptr;
  if (align < kPage) align = kPage;
  const size_t len = round_up(size + kBigHeader + (align > kPage ? align : 0), kPage);
  if (t_heap.holding) return nullptr;
  uintptr_t block = 0;
  {
    Holding h;
    g_big_lock.lock();
    block = big_take(len);
    g_big_lock.unlock();
  }
  if (block == 0) {  // big area exhausted: a mapping of its own
    const int saved = errno;
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    errno = saved;
    if (m == MAP_FAILED) return nullptr;
    block = reinterpret_cast<uintptr_t>(m);
    bool tracked = false;
    {
      Holding h;
      g_big_lock.lock();
      const int n = g_fallback_count.load(std::memory_order_relaxed);
      if (n < kMaxFallback) {
        g_fallback[n] = Extent{block, len};
        g_fallback_count.store(n + 1, std::memory_order_release);
        tracked = true;
      }
      g_big_lock.unlock();
    }
    if (!tracked) {
      munmap(m, len);
      errno = saved;
      return nullptr;
    }
  }
  const uintptr_t payload = round_up(block + kBigHeader, align);
  auto* hdr = reinterpret_cast<BigHeader*>(payload - kBigHeader);
  hdr->magic = kBigMagic;
  hdr->block = block;
  hdr->len = len;
  return reinterpret_cast<void*>(payload);
}

// Index of the fallback mapping containing u, or -1. Lock not required: entries below the
// published count are complete (release/acquire), and a pointer being freed cannot race with
// the removal of its own mapping.
int find_fallback(uintptr_t u) noexcept {
  const int n = g_fallback_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (u - g_fallback[i].start < g_fallback[i].len) return i;
  }
  return -1;
}

void big_free(void* p) noexcept {
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  if ((u & (kPage - 1)) != 0) return;  // not a payload we handed out
  auto* hdr = reinterpret_cast<BigHeader*>(u - kBigHeader);
  if (hdr->magic != kBigMagic) return;  // double free or foreign pointer: ignore
  const uintptr_t block = hdr->block;
  const size_t len = hdr->len;
  hdr->magic = 0;
  const int saved = errno;
  if (block >= g_big_lo && block < g_hi.load(std::memory_order_relaxed)) {
    // Release the pages before the extent becomes reusable by another thread.
    madvise(reinterpret_cast<void*>(block), len, MADV_DONTNEED);
    errno = saved;
    if (t_heap.holding) return;  // re-entered from a signal: leak rather than deadlock
    Holding h;
    g_big_lock.lock();
    big_give(block, len);
    g_big_lock.unlock();
    return;
  }
  if (t_heap.holding) return;
  bool found = false;
  {
    Holding h;
    g_big_lock.lock();
    const int n = g_fallback_count.load(std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
      if (g_fallback[i].start == block) {
        g_fallback[i] = g_fallback[n - 1];
        g_fallback_count.store(n - 1, std::memory_order_release);
        found = true;
        break;
      }
    }
    g_big_lock.unlock();
  }
  if (found) munmap(reinterpret_cast<void*>(block), len);
  errno = saved;
}

inline bool in_region(uintptr_t u) noexcept {
  const uintptr_t lo = g_lo.load(std::memory_order_relaxed);
  return u - lo < g_hi.load(std::memory_order_relaxed) - lo;
}

}  // namespace

void* private_alloc(size_t size) noexcept {
  if (!ready()) return nullptr;
  if (size > (size_t{1} << kMaxShift)) return big_alloc(size, 16);
  if (t_heap.holding) return nullptr;
  {
    Holding h;
    for (int c = class_of(size); c < kClasses; ++c) {  // exhausted class: borrow a larger one
      SizeClass& sc = g_class[c];
      const size_t bytes = size_t{1} << (c + kMinShift);
      sc.lock.lock();
      void* p = sc.free_head;
      if (p != nullptr) {
        sc.free_head = *static_cast<void**>(p);
        sc.lock.unlock();
        return p;
      }
      if (sc.end - sc.bump >= bytes) {
        p = reinterpret_cast<void*>(sc.bump);
        sc.bump += bytes;
        sc.lock.unlock();
        return p;
      }
      sc.lock.unlock();
    }
  }
  return big_alloc(size, 16);
}

void* private_alloc_zeroed(size_t size) noexcept {
  if (!ready()) return nullptr;
  // A big block's pages were never touched, were released with MADV_DONTNEED when freed, or are
  // a fresh mapping: zero already. Left untouched, a large table (the simulator's entries) costs
  // memory only where it is used. Class blocks are recycled: cleared.
  if (size > (size_t{1} << kMaxShift)) return big_alloc(size, 16);
  void* p = private_alloc(size);
  if (p != nullptr) memset(p, 0, size);
  return p;
}

void* private_alloc_aligned(size_t size, size_t align) noexcept {
  if (align <= 16) return private_alloc(size);
  if (align <= (size_t{1} << kMaxShift) && size <= (size_t{1} << kMaxShift)) {
    // Class blocks are aligned to their size; a big block (fallback) is page aligned.
    void* p = private_alloc(size < align ? align : size);
    if (p == nullptr || (reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0) return p;
    private_free(p);
  }
  if (!ready()) return nullptr;
  return big_alloc(size, align);
}

void private_free(void* p) noexcept {
  if (p == nullptr) return;
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  if (in_region(u) && u < g_big_lo) {
    const uintptr_t off = u - g_lo.load(std::memory_order_relaxed);
    const int c = static_cast<int>(off >> g_slice_shift);
    const uintptr_t in_slice = off & ((uintptr_t{1} << g_slice_shift) - 1);
    if ((in_slice & ((uintptr_t{1} << (c + kMinShift)) - 1)) != 0) return;  // not a block start
    if (t_heap.holding) return;  // re-entered from a signal handler: leak, don't deadlock
    Holding h;
    SizeClass& sc = g_class[c];
    sc.lock.lock();
    *static_cast<void**>(p) = sc.free_head;
    sc.free_head = p;
    sc.lock.unlock();
    return;
  }
  if (in_region(u)) {
    big_free(p);
    return;
  }
  const int i = find_fallback(u);
  if (i >= 0 && u >= g_fallback[i].start + kBigHeader) big_free(p);
}

bool is_private(const void* p) noexcept {
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  if (in_region(u)) return true;
  return g_fallback_count.load(std::memory_order_relaxed) != 0 && find_fallback(u) >= 0;
}

size_t private_usable_size(const void* p) noexcept {
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  if (p == nullptr) return 0;
  if (in_region(u) && u < g_big_lo) {
    const int c = static_cast<int>((u - g_lo.load(std::memory_order_relaxed)) >> g_slice_shift);
    return size_t{1} << (c + kMinShift);
  }
  const auto* hdr = reinterpret_cast<const BigHeader*>(u - kBigHeader);
  if ((u & (kPage - 1)) != 0 || hdr->magic != kBigMagic) return 0;
  return hdr->block + hdr->len - u;
}

void* private_realloc(void* p, size_t size) noexcept {
  if (p == nullptr) return private_alloc(size);
  const size_t have = private_usable_size(p);
  // Keep the block when the new size still fits and would not fit a class half the size.
  if (size <= have && (have <= 16 || size > have / 2)) return p;
  void* q = private_alloc(size);
  if (q == nullptr) return nullptr;  // p untouched, like realloc
  memcpy(q, p, size < have ? size : have);
  private_free(p);
  return q;
}

size_t private_region_size() noexcept {
  return g_hi.load(std::memory_order_relaxed) - g_lo.load(std::memory_order_relaxed);
}

void* reserve_zeroed(size_t bytes) noexcept {
  const int saved = errno;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  errno = saved;
  return m == MAP_FAILED ? nullptr : m;
}

// glibc runs atfork handlers under its atfork lock, so only one thread is between prepare and
// parent/child at a time; t_heap.fork_locked remembers whether this thread took the locks.
void private_heap_before_fork() noexcept {
  if (t_heap.holding) return;  // fork from a signal handler inside the heap: nothing safe to do
  t_heap.holding = 1;  // allocations between prepare and parent/child get nullptr, not deadlock
  std::atomic_signal_fence(std::memory_order_seq_cst);
  for (SizeClass& sc : g_class) sc.lock.lock();
  g_big_lock.lock();
  t_heap.fork_locked = 1;
}

void private_heap_after_fork_parent() noexcept {
  if (!t_heap.fork_locked) return;
  g_big_lock.unlock();
  for (SizeClass& sc : g_class) sc.lock.unlock();
  t_heap.fork_locked = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_heap.holding = 0;
}

void private_heap_after_fork_child() noexcept {
  // Only this thread exists now. Locks held by threads that no longer exist stay held forever
  // otherwise; with heap_before_fork the structures they protect are consistent.
  g_big_lock.reset();
  for (SizeClass& sc : g_class) sc.lock.reset();
  t_heap.holding = 0;
  t_heap.fork_locked = 0;
}

}  // namespace whymiss::rt
