// Allocation call sites: the return addresses of the allocating code, interned so that equal
// stacks share one index.
//
// Capture. Exact mode compiles the program with -fno-omit-frame-pointer, so the primary method is
// a frame-pointer walk: frames[0] is the hook's own return address (the direct caller, always
// right), then the chain of saved %rbp / return-address pairs starting at the hook's frame. Code
// without frame pointers (libstdc++.so, libc) may leave anything in %rbp, so every link is
// validated: strictly increasing, 8-byte aligned, and inside this thread's stack mapping, which is
// entirely readable; the walk stops at the first link that is not. A walk never faults.
//
// Stack bounds are found once per thread by reading /proc/self/maps with raw syscalls (no malloc,
// no stdio, no locks; not a cancellation point). pthread_getattr_np is avoided on purpose: it
// takes the thread's descriptor lock and calls realloc inside it, so a program calling it on
// itself would deadlock in our hook. For a glibc thread the upper bound is tightened to the
// thread pointer (its descriptor sits at the top of its stack mapping), for the main thread to
// __libc_stack_end; the main stack's lower bound is extended by 120 MiB because that stack grows
// (the kernel keeps at least 128 MiB below the stack limit free of other mappings). Only those two
// kinds of stack are walked: a frame elsewhere (sigaltstack, coroutine stacks) re-reads the maps
// (at most 4 times per thread) and otherwise gets a depth-1 site.
//
// Interning: an open-addressed table of 2^21 64-bit entries (low 32 bits = site index + 1, high
// 32 bits = hash tag) over an array of up to 2^20 SiteRecords. Lookups are lock-free (entries and
// records are published with release stores and never change); inserts take one spinlock.
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "runtime/common/heap_internal.h"

extern "C" void* __libc_stack_end;  // exported by ld.so: the stack pointer at process entry

namespace whymiss::rt {
namespace {

constexpr uint32_t kMaxSites = 1u << 20;
constexpr uint32_t kIndexBits = 21;
constexpr uint32_t kIndexSize = 1u << kIndexBits;
constexpr uintptr_t kMainStackReach = uintptr_t{120} << 20;
constexpr int kMaxMapsReads = 4;

// ---- stack bounds ----

inline uintptr_t parse_hex(const char*& s, const char* end) noexcept {
  uintptr_t v = 0;
  for (; s < end; ++s) {
    const char c = *s;
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      break;
    }
    v = (v << 4) | static_cast<uintptr_t>(d);
  }
  return v;
}

// Parses "start-end perms ..." in [line, end); true if the range contains addr (then *rw tells
// whether it is readable and writable).
bool line_contains(const char* line, const char* end, uintptr_t addr, uintptr_t* lo,
                   uintptr_t* hi, bool* rw) noexcept {
  const char* s = line;
  const uintptr_t start = parse_hex(s, end);
  if (s >= end || *s != '-') return false;
  ++s;
  const uintptr_t stop = parse_hex(s, end);
  if (addr < start || addr >= stop) return false;
  *rw = end - s >= 3 && s[1] == 'r' && s[2] == 'w';
  *lo = start;
  *hi = stop;
  return true;
}

// Finds the mapping containing `addr` in /proc/self/maps; true if there is one and it is readable
// and writable (a stack). Raw syscalls only.
bool find_mapping(uintptr_t addr, uintptr_t* lo, uintptr_t* hi) noexcept {
  constexpr size_t kBuf = 8192;  // > any line: paths are at most PATH_MAX (4096) bytes
  char* buf = static_cast<char*>(private_alloc(kBuf));
  if (buf == nullptr) return false;
  const long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
  bool found = false;
  bool rw = false;
  if (fd >= 0) {
    size_t have = 0;
    bool in_long_line = false;  // inside a line whose start was already parsed
    while (!found) {
      const long n = syscall(SYS_read, fd, buf + have, kBuf - have);
      if (n <= 0) break;
      have += static_cast<size_t>(n);
      size_t pos = 0;
      while (!found) {
        const char* line = buf + pos;
        const char* nl = static_cast<const char*>(memchr(line, '\n', have - pos));
        if (nl == nullptr) break;
        if (!in_long_line) found = line_contains(line, nl, addr, lo, hi, &rw);
        in_long_line = false;
        pos = static_cast<size_t>(nl - buf) + 1;
      }
      if (found) break;
      if (pos == 0 && have == kBuf) {  // a line longer than the buffer: parse its start, skip it
        if (!in_long_line) found = line_contains(buf, buf + have, addr, lo, hi, &rw);
        in_long_line = true;
        have = 0;
        continue;
      }
      memmove(buf, buf + pos, have - pos);
      have -= pos;
    }
    syscall(SYS_close, fd);
  }
  private_free(buf);
  return found && rw;
}

// Learns this thread's stack bounds around `fp`; false when they cannot be known (the previous
// bounds, if any, are kept).
bool learn_stack(uintptr_t fp) noexcept {
  ThreadHeapState& t = t_heap;
  if (t.stack_reads >= kMaxMapsReads) return false;
  ++t.stack_reads;
  const int saved = errno;
  uintptr_t lo = 0, hi = 0;
  const bool ok = find_mapping(fp, &lo, &hi);
  errno = saved;
  if (!ok) return false;
  const auto main_end = reinterpret_cast<uintptr_t>(__libc_stack_end);
  uintptr_t tp;
  __asm__("mov %%fs:0, %0" : "=r"(tp));  // the thread pointer (glibc: struct pthread*)
  if (main_end >= lo && main_end < hi) {
    hi = main_end;  // the main stack: frames of main() and below lie under it
    lo = main_end > kMainStackReach ? main_end - kMainStackReach : 0;
  } else if (tp > fp && tp < hi) {
    hi = tp;  // a glibc thread: its descriptor (and static TLS) sit at the top of the mapping
  } else {
    // Not this thread's own stack (sigaltstack, a coroutine's stack in some heap mapping that
    // may be unmapped later): no walk.
    return false;
  }
  t.stack_lo = lo;
  t.stack_hi = hi;
  t.stack_state = 1;
  return true;
}

// ---- interning ----

std::atomic<int> g_table_state{0};  // 0 = none, 1 = being created, 2 = ready, 3 = failed
profile::SiteRecord* g_sites = nullptr;
std::atomic<uint64_t>* g_index = nullptr;
std::atomic<uint32_t> g_count{0};
HeapLock g_insert_lock;
std::atomic<uint64_t> g_dropped{0};

// Creates the table on first use (two mmaps); another thread creating it is waited for. The
// creating thread cannot re-enter here: callers run under HeapGuard.
bool table_ready() noexcept {
  for (unsigned spins = 0;; ++spins) {
    int s = g_table_state.load(std::memory_order_acquire);
    if (s == 2) return true;
    if (s == 3) return false;
    if (s == 0 && g_table_state.compare_exchange_strong(s, 1, std::memory_order_acquire)) {
      auto* sites = static_cast<profile::SiteRecord*>(
          reserve_zeroed(sizeof(profile::SiteRecord) * kMaxSites));
      auto* index = static_cast<std::atomic<uint64_t>*>(
          reserve_zeroed(sizeof(std::atomic<uint64_t>) * kIndexSize));
      if (sites == nullptr || index == nullptr) {
        g_table_state.store(3, std::memory_order_release);
        return false;
      }
      g_sites = sites;
      g_index = index;
      g_table_state.store(2, std::memory_order_release);
      return true;
    }
    if (spins < 128) {
      __builtin_ia32_pause();
    } else {
      sched_yield();
    }
  }
}

// Independent multiplies (one odd constant per frame) pipeline well; the final mix spreads the
// bits. Collisions only cost a record comparison.
inline uint64_t hash_frames(const uint64_t* frames, int depth) noexcept {
  static constexpr uint64_t kMul[profile::kSiteFrames] = {
      0x9E3779B97F4A7C15ull, 0xBF58476D1CE4E5B9ull, 0x94D049BB133111EBull, 0xD6E8FEB86659FD93ull,
      0xA0761D6478BD642Full, 0xE7037ED1A0B428DBull, 0x8EBC6AF09C88C6E3ull, 0x589965CC75374CC3ull};
  static_assert(profile::kSiteFrames == 8, "one multiplier per frame");
  uint64_t h = static_cast<uint64_t>(depth);
  for (int i = 0; i < depth; ++i) h += frames[i] * kMul[i];
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  return h ^ (h >> 29);
}

inline bool same(const profile::SiteRecord& r, const uint64_t* frames, int depth) noexcept {
  if (r.depth != static_cast<uint32_t>(depth)) return false;
  for (int i = 0; i < depth; ++i) {
    if (r.frames[i] != frames[i]) return false;
  }
  return true;
}

// Probes for the stack; returns its index, or kNoSite with *slot = the empty entry reached.
inline uint32_t probe(uint64_t h, const uint64_t* frames, int depth, uint32_t* slot) noexcept {
  const uint64_t tag = h >> 32;
  for (uint32_t i = static_cast<uint32_t>(h) & (kIndexSize - 1);; i = (i + 1) & (kIndexSize - 1)) {
    const uint64_t e = g_index[i].load(std::memory_order_acquire);
    if (e == 0) {
      *slot = i;
      return profile::kNoSite;
    }
    if ((e >> 32) == tag) {
      const uint32_t idx = static_cast<uint32_t>(e) - 1;
      if (same(g_sites[idx], frames, depth)) return idx;
    }
  }
}

}  // namespace

int capture_frames(uintptr_t ret, uintptr_t fp, uint64_t* frames, int max) noexcept {
  if (max <= 0) return 0;
  frames[0] = ret;
  int n = 1;
  ThreadHeapState& t = t_heap;
  if (t.stack_state != 1 || fp < t.stack_lo || fp >= t.stack_hi) {
    if (!learn_stack(fp) || fp < t.stack_lo || fp >= t.stack_hi) return n;
  }
  const uintptr_t hi = t.stack_hi;
  // fp is the hook's frame: [fp] = caller's saved %rbp, [fp+8] = `ret`.
  if ((fp & 7) != 0 || fp + 16 > hi) return n;
  uintptr_t next = reinterpret_cast<const uintptr_t*>(fp)[0];
  while (n < max) {
    if (next <= fp || (next & 7) != 0 || next + 16 > hi) break;
    fp = next;
    const uintptr_t ra = reinterpret_cast<const uintptr_t*>(fp)[1];
    if (ra < 4096) break;  // outermost frame (glibc zeroes %rbp at thread start) or garbage
    frames[n++] = ra;
    next = reinterpret_cast<const uintptr_t*>(fp)[0];
  }
  return n;
}

uint32_t intern_site(const uint64_t* frames, int depth) noexcept {
  if (depth <= 0 || depth > profile::kSiteFrames || !table_ready()) {
    if (depth > 0) g_dropped.fetch_add(1, std::memory_order_relaxed);
    return profile::kNoSite;
  }
  const uint64_t h = hash_frames(frames, depth);
  uint32_t slot = 0;
  uint32_t idx = probe(h, frames, depth, &slot);
  if (idx != profile::kNoSite) return idx;
  // Callers run under HeapGuard, so this thread cannot re-enter here from a nested hook.
  g_insert_lock.lock();
  idx = probe(h, frames, depth, &slot);  // someone may have inserted it meanwhile
  if (idx == profile::kNoSite) {
    const uint32_t n = g_count.load(std::memory_order_relaxed);
    if (n < kMaxSites) {
      profile::SiteRecord& r = g_sites[n];
      memset(&r, 0, sizeof(r));
      for (int i = 0; i < depth; ++i) r.frames[i] = frames[i];
      r.depth = static_cast<uint32_t>(depth);
      g_index[slot].store(((h >> 32) << 32) | (n + 1), std::memory_order_release);
      g_count.store(n + 1, std::memory_order_release);
      idx = n;
    } else {
      g_dropped.fetch_add(1, std::memory_order_relaxed);
    }
  }
  g_insert_lock.unlock();
  return idx;
}

uint64_t dropped_sites() noexcept {
  return g_dropped.load(std::memory_order_relaxed);
}

size_t site_count() noexcept {
  return g_count.load(std::memory_order_acquire);
}

size_t export_sites(profile::SiteRecord* out, size_t max) noexcept {
  const size_t n = site_count();
  const size_t k = n < max ? n : max;
  if (k > 0) memcpy(out, g_sites, k * sizeof(profile::SiteRecord));
  return k;
}

void sites_after_fork_child() noexcept {
  g_insert_lock.reset();
  // Stack bounds of the forking thread stay valid in the child (same mapping, same TCB).
}

}  // namespace whymiss::rt
