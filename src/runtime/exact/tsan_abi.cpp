// Compiler-facing ABI layer of whymiss's exact mode.
//
// User code is compiled with -fsanitize=thread (GCC 12 or Clang 14) but linked against this library
// instead of libtsan. Every entry point either compiler can emit is defined here with the signature
// the compiler expects (see docs/tsan-abi.md for the empirical symbol lists and the flags). Each one
// forwards the access to the sink (access_sink.h) and, where the call replaces a real operation
// (atomics, memcpy/memset/memmove), performs that operation itself.
//
// Constraints honoured throughout: no allocation, no locks on the normal paths, no libc calls, no
// libstdc++ dependency (C programs link this with plain `cc`), async-signal-safe, and nothing here is
// itself instrumented. The only state is a per-thread re-entrancy flag (see report_*), two
// initialisation flags (see __tsan_init) and a table of spin locks used solely for misaligned
// 16-byte atomics.
#include "runtime/exact/access_sink.h"
#ifdef WHYMISS_EXACT_HIT_PATH
#include "runtime/exact/hit_path.h"  // the exact runtime's own build: its hit path, inline
#endif

#include <cstddef>
#include <cstdint>

#if !defined(__x86_64__)
#error "whymiss's tsan ABI layer targets x86-64 only"
#endif

// Exported, C linkage, never instrumented even if the runtime is accidentally built with TSan.
#define WM_API extern "C" __attribute__((visibility("default"), used, no_sanitize("thread")))
// The return address of the current __tsan_* call = the instruction after the call in user code.
#define WM_IP() reinterpret_cast<uintptr_t>(__builtin_return_address(0))

namespace {

using whymiss::rt::on_access;
using whymiss::rt::on_range;

// ---------------------------------------------------------------------------------------------------
// Re-entrancy guard. Anything the sink does that reaches this layer again (a sink that calls memcpy
// while the program is linked with --wrap=memcpy, a sink accidentally built with -fsanitize=thread,
// a signal handler running instrumented code while this thread is inside the sink) is performed but
// not reported, so the sink is never re-entered on the same thread. initial-exec TLS: a single
// %fs-relative access, no __tls_get_addr, nothing allocated, safe in signal handlers.
__thread unsigned t_in_sink __attribute__((tls_model("initial-exec"))) = 0;

// Set once __tsan_init has finished initialising the sink (see ready()).
int g_ready = 0;

__attribute__((always_inline)) inline void report_access(uintptr_t ip, const volatile void* addr,
                                                          uint32_t size, bool write) noexcept {
  if (t_in_sink != 0) return;
  t_in_sink = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);  // compiler barrier: a signal handler sees the flag
#ifdef WHYMISS_EXACT_HIT_PATH
  if (!whymiss::rt::take_hit(ip, reinterpret_cast<uintptr_t>(addr), size, write))
#endif
    on_access(ip, reinterpret_cast<uintptr_t>(addr), size, write);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t_in_sink = 0;
}

// Ordering hooks around an atomic operation (access_sink.h), under the same guard as accesses.
// Whether an order releases / acquires: consume counts as acquire, seq_cst as both.
inline bool releases(int mo) noexcept {
  const unsigned b = static_cast<unsigned>(mo) & 0x7fffu;
  return b == __ATOMIC_RELEASE || b == __ATOMIC_ACQ_REL || b >= __ATOMIC_SEQ_CST;
}
inline bool acquires(int mo) noexcept {
  const unsigned b = static_cast<unsigned>(mo) & 0x7fffu;
  return b == __ATOMIC_CONSUME || b == __ATOMIC_ACQUIRE || b == __ATOMIC_ACQ_REL ||
         b >= __ATOMIC_SEQ_CST;
}
// Runs f() inside the sink (the same guard as an access).
template <class F>
__attribute__((always_inline)) inline void in_sink(F&& f) noexcept {
  t_in_sink = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  f();
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t_in_sink = 0;
}
// Before an operation with order `mo`; returns what sync_after needs (0: it released nothing).
__attribute__((always_inline)) inline uint64_t sync_before(const volatile void* addr,
                                                           int mo) noexcept {
  if (t_in_sink != 0 || !releases(mo)) return 0;
  uint64_t b = 0;
  in_sink([&] { b = whymiss::rt::sync_before(reinterpret_cast<uintptr_t>(addr), acquires(mo)); });
  return b;
}
// After it: `mo` is the order it completed with (a failed compare-exchange's failure order),
// `done` whether it wrote (false for a failed compare-exchange).
__attribute__((always_inline)) inline void sync_after(const volatile void* addr, int mo,
                                                      uint64_t before, bool done = true) noexcept {
  if (t_in_sink != 0) return;
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (before != 0 && !done) in_sink([&] { whymiss::rt::sync_undo(a, before); });
  if (before == 0 && acquires(mo)) in_sink([&] { whymiss::rt::sync_after(a); });
}

__attribute__((always_inline)) inline void report_range(uintptr_t ip, const volatile void* addr,
                                                         size_t size, bool write) noexcept {
  if (t_in_sink != 0) return;
  t_in_sink = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);  // compiler barrier: a signal handler sees the flag
  on_range(ip, reinterpret_cast<uintptr_t>(addr), size, write);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t_in_sink = 0;
}

// ---------------------------------------------------------------------------------------------------
// Byte movers for the memcpy/memset/memmove replacements. Written with string instructions so the
// compiler can never turn them back into calls to memcpy/memset (which, under --wrap, would recurse).
// `rep movsb`/`rep stosb` are fast on CPUs with ERMSB/FSRM (Intel since Ivy Bridge, recent AMD).
inline void copy_forward(void* dst, const void* src, size_t n) noexcept {
  asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

inline void copy_backward_bytes(void* dst, const void* src, size_t n) noexcept {
  if (n == 0) return;
  auto* d = static_cast<unsigned char*>(dst) + n - 1;
  auto* s = static_cast<const unsigned char*>(src) + n - 1;
  // DF is clear on entry per the SysV ABI and the kernel clears it for signal handlers, so the
  // std...cld window cannot leak into other code.
  asm volatile("std\n\trep movsb\n\tcld" : "+D"(d), "+S"(s), "+c"(n) : : "memory", "cc");
}

inline void fill_bytes(void* dst, int c, size_t n) noexcept {
  asm volatile("rep stosb" : "+D"(dst), "+c"(n) : "a"(c) : "memory");
}

inline void move_bytes(void* dst, const void* src, size_t n) noexcept {
  auto d = reinterpret_cast<uintptr_t>(dst);
  auto s = reinterpret_cast<uintptr_t>(src);
  if (d <= s || d - s >= n) {  // no overlap, or dst below src: a forward copy is correct
    copy_forward(dst, src, n);
    return;
  }
  size_t dist = d - s;  // 0 < dist < n, dst above src: copy from the end
  if (dist < 64) {
    copy_backward_bytes(dst, src, n);
    return;
  }
  // Chunks no longer than the distance never overlap, so each can use the fast forward copy.
  while (n != 0) {
    size_t chunk = n < dist ? n : dist;
    n -= chunk;
    copy_forward(reinterpret_cast<void*>(d + n), reinterpret_cast<const void*>(s + n), chunk);
  }
}

// ---------------------------------------------------------------------------------------------------
// Memory orders. Both compilers pass the C11/C++11 encoding: 0 relaxed, 1 consume, 2 acquire,
// 3 release, 4 acq_rel, 5 seq_cst (GCC 12 passes consume as 1, Clang 14 already maps it to 2).
// GCC passes the raw __atomic model argument: it may carry HLE bits (__ATOMIC_HLE_ACQUIRE = 1<<16,
// __ATOMIC_HLE_RELEASE = 1<<17) and may be a run-time value, so mask and sanitise. Invalid orders
// for an operation are strengthened (never weakened) to a valid one.
constexpr int kRelaxed = __ATOMIC_RELAXED;
constexpr int kAcquire = __ATOMIC_ACQUIRE;
constexpr int kRelease = __ATOMIC_RELEASE;
constexpr int kAcqRel = __ATOMIC_ACQ_REL;
constexpr int kSeqCst = __ATOMIC_SEQ_CST;
static_assert(__ATOMIC_RELAXED == 0 && __ATOMIC_CONSUME == 1 && __ATOMIC_ACQUIRE == 2 &&
              __ATOMIC_RELEASE == 3 && __ATOMIC_ACQ_REL == 4 && __ATOMIC_SEQ_CST == 5);

template <int N>
struct Ord {
  static constexpr int value = N;
};

inline int base_order(int mo) noexcept {
  unsigned b = static_cast<unsigned>(mo) & 0x7fffu;  // drop HLE and GCC-internal "sync" bits
  if (b == __ATOMIC_CONSUME) return kAcquire;          // consume is implemented as acquire
  return b <= 5 ? static_cast<int>(b) : kSeqCst;
}

// Calls f(Ord<order>{}) with a compile-time order valid for a load.
template <class F>
__attribute__((always_inline)) inline decltype(auto) with_load_order(int mo, F&& f) noexcept {
  switch (base_order(mo)) {
    case kRelaxed: return f(Ord<kRelaxed>{});
    case kAcquire: return f(Ord<kAcquire>{});
    default: return f(Ord<kSeqCst>{});  // release/acq_rel are not load orders: strengthen
  }
}

template <class F>
__attribute__((always_inline)) inline decltype(auto) with_store_order(int mo, F&& f) noexcept {
  switch (base_order(mo)) {
    case kRelaxed: return f(Ord<kRelaxed>{});
    case kRelease: return f(Ord<kRelease>{});
    default: return f(Ord<kSeqCst>{});  // acquire/acq_rel are not store orders: strengthen
  }
}

template <class F>
__attribute__((always_inline)) inline decltype(auto) with_rmw_order(int mo, F&& f) noexcept {
  switch (base_order(mo)) {
    case kRelaxed: return f(Ord<kRelaxed>{});
    case kAcquire: return f(Ord<kAcquire>{});
    case kRelease: return f(Ord<kRelease>{});
    case kAcqRel: return f(Ord<kAcqRel>{});
    default: return f(Ord<kSeqCst>{});
  }
}

// Calls f(Ord<success>{}, Ord<failure>{}) with a valid pair: failure in {relaxed, acquire, seq_cst}
// and success at least as strong as failure (success strengthened if needed, as C++17 permits a
// failure order stronger than the success order).
template <class F>
__attribute__((always_inline)) inline decltype(auto) with_cas_orders(int mo, int fail_mo,
                                                                     F&& f) noexcept {
  int s = base_order(mo);
  int fl = base_order(fail_mo);
  if (fl == kRelease) fl = kRelaxed;  // the failure path only loads: drop the release half
  if (fl == kAcqRel) fl = kAcquire;
  if (fl == kSeqCst) {
    s = kSeqCst;
  } else if (fl == kAcquire) {
    if (s == kRelaxed) s = kAcquire;
    if (s == kRelease) s = kAcqRel;
  }
  switch (s) {
    case kRelaxed: return f(Ord<kRelaxed>{}, Ord<kRelaxed>{});
    case kAcquire:
      if (fl == kAcquire) return f(Ord<kAcquire>{}, Ord<kAcquire>{});
      return f(Ord<kAcquire>{}, Ord<kRelaxed>{});
    case kRelease: return f(Ord<kRelease>{}, Ord<kRelaxed>{});
    case kAcqRel:
      if (fl == kAcquire) return f(Ord<kAcqRel>{}, Ord<kAcquire>{});
      return f(Ord<kAcqRel>{}, Ord<kRelaxed>{});
    default:
      if (fl == kSeqCst) return f(Ord<kSeqCst>{}, Ord<kSeqCst>{});
      if (fl == kAcquire) return f(Ord<kSeqCst>{}, Ord<kAcquire>{});
      return f(Ord<kSeqCst>{}, Ord<kRelaxed>{});
  }
}

// ---------------------------------------------------------------------------------------------------
// 1/2/4/8-byte atomics: the __atomic builtins, which are always lock-free and inline on x86-64.
template <class T>
struct Atomic {
  static T load(const volatile T* a, int mo) noexcept {
    return with_load_order(mo, [&](auto o) { return __atomic_load_n(a, decltype(o)::value); });
  }
  static void store(volatile T* a, T v, int mo) noexcept {
    with_store_order(mo, [&](auto o) { __atomic_store_n(a, v, decltype(o)::value); });
  }
  static T exchange(volatile T* a, T v, int mo) noexcept {
    return with_rmw_order(mo, [&](auto o) { return __atomic_exchange_n(a, v, decltype(o)::value); });
  }
  static T fetch_add(volatile T* a, T v, int mo) noexcept {
    return with_rmw_order(mo, [&](auto o) { return __atomic_fetch_add(a, v, decltype(o)::value); });
  }
  static T fetch_sub(volatile T* a, T v, int mo) noexcept {
    return with_rmw_order(mo, [&](auto o) { return __atomic_fetch_sub(a, v, decltype(o)::value); });
  }
  static T fetch_and(volatile T* a, T v, int mo) noexcept {
    return with_rmw_order(mo, [&](auto o) { return __atomic_fetch_and(a, v, decltype(o)::value); });
  }
  static T fetch_or(volatile T* a, T v, int mo) noexcept {
    return with_rmw_order(mo, [&](auto o) { return __atomic_fetch_or(a, v, decltype(o)::value); });
  }
  static T fetch_xor(volatile T* a, T v, int mo) noexcept {
    return with_rmw_order(mo, [&](auto o) { return __atomic_fetch_xor(a, v, decltype(o)::value); });
  }
  static T fetch_nand(volatile T* a, T v, int mo) noexcept {
    return with_rmw_order(mo, [&](auto o) { return __atomic_fetch_nand(a, v, decltype(o)::value); });
  }
  // On failure *expected receives the current value (GCC's __tsan_*_compare_exchange_{strong,weak}
  // contract, same as __atomic_compare_exchange_n).
  static bool cas(volatile T* a, T* expected, T desired, bool weak, int mo, int fail_mo) noexcept {
    return with_cas_orders(mo, fail_mo, [&](auto s, auto f) {
      if (weak)
        return __atomic_compare_exchange_n(a, expected, desired, true, decltype(s)::value,
                                           decltype(f)::value);
      return __atomic_compare_exchange_n(a, expected, desired, false, decltype(s)::value,
                                         decltype(f)::value);
    });
  }
};

// ---------------------------------------------------------------------------------------------------
// 16-byte atomics. GCC compiles __atomic_*_16 to libatomic calls (even with -mcx16) and libatomic
// may take a lock, so use LOCK CMPXCHG16B directly: lock-free, no libatomic, no -mcx16 needed to
// build the runtime (requires a CPU with CX16, i.e. any x86-64 since ~2006; x86-64-v2 guarantees it).
// LOCK-prefixed instructions are full barriers, which satisfies every requested memory order.
// CMPXCHG16B faults (#GP) on an address that is not 16-byte aligned; compilers align 16-byte atomic
// objects, but for robustness misaligned addresses fall back to a striped spin lock (atomic only with
// respect to other misaligned 16-byte atomics on the same address, and not signal-reentrant).
using u128 = unsigned __int128;

inline bool cmpxchg16b(volatile u128* a, u128* expected, u128 desired) noexcept {
  uint64_t lo = static_cast<uint64_t>(*expected);
  uint64_t hi = static_cast<uint64_t>(*expected >> 64);
  bool ok;
  asm volatile("lock cmpxchg16b %1"
               : "=@ccz"(ok), "+m"(*a), "+a"(lo), "+d"(hi)
               : "b"(static_cast<uint64_t>(desired)), "c"(static_cast<uint64_t>(desired >> 64))
               : "memory");
  *expected = (static_cast<u128>(hi) << 64) | lo;
  return ok;
}

constexpr unsigned kMisalignedLocks = 64;
unsigned char g_misaligned_lock[kMisalignedLocks];

class MisalignedGuard {
 public:
  explicit MisalignedGuard(const volatile void* a) noexcept
      : lock_(&g_misaligned_lock[(reinterpret_cast<uintptr_t>(a) >> 4) % kMisalignedLocks]) {
    while (__atomic_test_and_set(lock_, __ATOMIC_ACQUIRE)) {
      while (__atomic_load_n(lock_, __ATOMIC_RELAXED)) __builtin_ia32_pause();
    }
  }
  ~MisalignedGuard() { __atomic_clear(lock_, __ATOMIC_RELEASE); }
  MisalignedGuard(const MisalignedGuard&) = delete;
  MisalignedGuard& operator=(const MisalignedGuard&) = delete;

 private:
  unsigned char* lock_;
};

inline bool aligned16(const volatile void* a) noexcept {
  return (reinterpret_cast<uintptr_t>(a) & 15u) == 0;
}

// Plain (non-atomic) 16-byte accessors for the locked path; volatile so they are real accesses.
inline u128 plain_load16(const volatile u128* a) noexcept {
  const volatile uint64_t* p = reinterpret_cast<const volatile uint64_t*>(a);
  return (static_cast<u128>(p[1]) << 64) | p[0];
}
inline void plain_store16(volatile u128* a, u128 v) noexcept {
  volatile uint64_t* p = reinterpret_cast<volatile uint64_t*>(a);
  p[0] = static_cast<uint64_t>(v);
  p[1] = static_cast<uint64_t>(v >> 64);
}

// Generic 16-byte read-modify-write: new = op(old); returns old.
template <class Op>
inline u128 rmw16(volatile u128* a, Op op) noexcept {
  if (!aligned16(a)) {
    MisalignedGuard g(a);
    u128 old = plain_load16(a);
    plain_store16(a, op(old));
    return old;
  }
  u128 old = 0;
  // First attempt with a guess of 0 doubles as the initial read of the current value.
  while (!cmpxchg16b(a, &old, op(old))) {
  }
  return old;
}

inline u128 load16(const volatile u128* a) noexcept {
  volatile u128* p = const_cast<volatile u128*>(a);
  if (!aligned16(a)) {
    MisalignedGuard g(a);
    return plain_load16(p);
  }
  // CMPXCHG16B with expected == desired == 0: either stores back the 0 that is already there or
  // fails and returns the current value. Either way *a is unchanged. (The target must be writable;
  // an atomic load from read-only memory is not supported, unlike with libatomic.)
  u128 v = 0;
  cmpxchg16b(p, &v, 0);
  return v;
}

inline bool cas16(volatile u128* a, u128* expected, u128 desired) noexcept {
  if (!aligned16(a)) {
    MisalignedGuard g(a);
    u128 cur = plain_load16(a);
    if (cur == *expected) {
      plain_store16(a, desired);
      return true;
    }
    *expected = cur;
    return false;
  }
  return cmpxchg16b(a, expected, desired);
}

template <>
struct Atomic<u128> {
  using T = u128;
  static T load(const volatile T* a, int) noexcept { return load16(a); }
  static void store(volatile T* a, T v, int) noexcept {
    rmw16(a, [v](T) { return v; });
  }
  static T exchange(volatile T* a, T v, int) noexcept {
    return rmw16(a, [v](T) { return v; });
  }
  static T fetch_add(volatile T* a, T v, int) noexcept {
    return rmw16(a, [v](T o) { return o + v; });
  }
  static T fetch_sub(volatile T* a, T v, int) noexcept {
    return rmw16(a, [v](T o) { return o - v; });
  }
  static T fetch_and(volatile T* a, T v, int) noexcept {
    return rmw16(a, [v](T o) { return o & v; });
  }
  static T fetch_or(volatile T* a, T v, int) noexcept {
    return rmw16(a, [v](T o) { return o | v; });
  }
  static T fetch_xor(volatile T* a, T v, int) noexcept {
    return rmw16(a, [v](T o) { return o ^ v; });
  }
  static T fetch_nand(volatile T* a, T v, int) noexcept {
    return rmw16(a, [v](T o) { return ~(o & v); });
  }
  static bool cas(volatile T* a, T* expected, T desired, bool, int, int) noexcept {
    return cas16(a, expected, desired);  // CMPXCHG16B never fails spuriously: weak == strong
  }
};

}  // namespace

// The runtime's interposed pthread functions (sync_hooks.cpp) enter the runtime from outside this
// layer: a signal handler that locks a mutex (not async-signal-safe, but programs do) while this
// thread is inside the sink would reach the simulator in the middle of an access. They take the
// same guard: false, and nothing taken, when the thread is inside the sink already.
namespace whymiss::rt {
bool enter_sink() noexcept {
  if (t_in_sink != 0) return false;
  t_in_sink = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  return true;
}
void leave_sink() noexcept {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t_in_sink = 0;
}
}  // namespace whymiss::rt

// =====================================================================================================
// Initialisation and function entry/exit.

WM_API void __tsan_init() noexcept {
  // Every instrumented translation unit calls this from a constructor (GCC: .init_array.00099,
  // Clang: .init_array.0 via tsan.module_ctor); the sink hears about it once. Anything the sink's
  // initialisation does that comes back here (memcpy under --wrap) is not reported to it.
  static int claimed = 0;
  if (__atomic_exchange_n(&claimed, 1, __ATOMIC_ACQ_REL) != 0) return;
  t_in_sink = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  whymiss::rt::on_init();
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t_in_sink = 0;
  __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
}

// Emitted unless disabled (GCC --param=tsan-instrument-func-entry-exit=0,
// Clang -mllvm -tsan-instrument-func-entry-exit=0). Kept as no-ops so such objects still link.
WM_API void __tsan_func_entry(void*) noexcept {}
WM_API void __tsan_func_exit() noexcept {}
// Clang emits these around code that must not be checked (e.g. with -tsan-handle-cxx-exceptions
// cleanups or ObjC); accesses are still real memory traffic, so they change nothing here.
WM_API void __tsan_ignore_thread_begin() noexcept {}
WM_API void __tsan_ignore_thread_end() noexcept {}

// =====================================================================================================
// Plain memory accesses. One macro per family; N is the access size in bytes.

#define WM_ACCESS_FN(NAME, N, WRITE) \
  WM_API void NAME(void* addr) noexcept { report_access(WM_IP(), addr, N, WRITE); }

#define WM_ACCESS_FAMILY(PREFIX, WRITE)  \
  WM_ACCESS_FN(PREFIX##1, 1, WRITE)      \
  WM_ACCESS_FN(PREFIX##2, 2, WRITE)      \
  WM_ACCESS_FN(PREFIX##4, 4, WRITE)      \
  WM_ACCESS_FN(PREFIX##8, 8, WRITE)      \
  WM_ACCESS_FN(PREFIX##16, 16, WRITE)

// Both compilers: aligned (or assumed-aligned) accesses.
WM_ACCESS_FAMILY(__tsan_read, false)
WM_ACCESS_FAMILY(__tsan_write, true)
// Clang: accesses with alignment below their size (packed fields). GCC uses the *_range calls.
WM_ACCESS_FAMILY(__tsan_unaligned_read, false)
WM_ACCESS_FAMILY(__tsan_unaligned_write, true)
// Both, only with tsan-distinguish-volatile=1 (off by default: volatile then uses plain calls).
WM_ACCESS_FAMILY(__tsan_volatile_read, false)
WM_ACCESS_FAMILY(__tsan_volatile_write, true)
WM_ACCESS_FAMILY(__tsan_unaligned_volatile_read, false)
WM_ACCESS_FAMILY(__tsan_unaligned_volatile_write, true)
// Clang, only with -tsan-compound-read-before-write=1: a read and write of the same location
// (x += 1). Reported once, as a write, like an atomic read-modify-write.
WM_ACCESS_FAMILY(__tsan_read_write, true)
WM_ACCESS_FAMILY(__tsan_unaligned_read_write, true)

// Explicit-pc variants (libtsan API for external instrumenters; neither compiler emits them). The
// caller's pc is passed through unchanged.
#define WM_ACCESS_PC_FN(NAME, N, WRITE)                                 \
  WM_API void NAME(void* addr, void* pc) noexcept {                     \
    report_access(reinterpret_cast<uintptr_t>(pc), addr, N, WRITE);     \
  }
WM_ACCESS_PC_FN(__tsan_read1_pc, 1, false)
WM_ACCESS_PC_FN(__tsan_read2_pc, 2, false)
WM_ACCESS_PC_FN(__tsan_read4_pc, 4, false)
WM_ACCESS_PC_FN(__tsan_read8_pc, 8, false)
WM_ACCESS_PC_FN(__tsan_read16_pc, 16, false)
WM_ACCESS_PC_FN(__tsan_write1_pc, 1, true)
WM_ACCESS_PC_FN(__tsan_write2_pc, 2, true)
WM_ACCESS_PC_FN(__tsan_write4_pc, 4, true)
WM_ACCESS_PC_FN(__tsan_write8_pc, 8, true)
WM_ACCESS_PC_FN(__tsan_write16_pc, 16, true)

// GCC: struct copies, packed/unaligned fields, odd-sized accesses.
WM_API void __tsan_read_range(void* addr, unsigned long size) noexcept {
  report_range(WM_IP(), addr, size, false);
}
WM_API void __tsan_write_range(void* addr, unsigned long size) noexcept {
  report_range(WM_IP(), addr, size, true);
}
WM_API void __tsan_read_range_pc(void* addr, unsigned long size, void* pc) noexcept {
  report_range(reinterpret_cast<uintptr_t>(pc), addr, size, false);
}
WM_API void __tsan_write_range_pc(void* addr, unsigned long size, void* pc) noexcept {
  report_range(reinterpret_cast<uintptr_t>(pc), addr, size, true);
}

// Virtual-table pointer traffic. Clang: vptr_read (load of the vptr for a virtual call) and
// vptr_update (store of the vptr in constructors/destructors); GCC: vptr_update only (its vptr loads
// come through __tsan_read8).
WM_API void __tsan_vptr_read(void** vptr_p) noexcept {
  report_access(WM_IP(), vptr_p, sizeof(void*), false);
}
WM_API void __tsan_vptr_update(void** vptr_p, void* /*new_val*/) noexcept {
  report_access(WM_IP(), vptr_p, sizeof(void*), true);
}

// =====================================================================================================
// memcpy / memset / memmove.
//
// GCC 12 and Clang 14 both leave these as calls to the plain libc names (libtsan intercepts those).
// Newer LLVM emits __tsan_memcpy/__tsan_memset/__tsan_memmove instead. For GCC 12 / Clang 14 the
// instrumented program is linked with -Wl,--wrap=memcpy,--wrap=memset,--wrap=memmove (and the
// __mem*_chk names, see below), which routes the calls made by the objects of that link (not by
// shared libraries) to the __wrap_* versions.
// All variants perform the operation and report source reads and destination writes.

namespace {
// With --wrap in a -static link, libc's own startup code (__libc_setup_tls, before TLS exists) calls
// __wrap_memcpy; so the mem* replacements only report once __tsan_init has run (and thereby touch
// the TLS re-entrancy flag only when it is safe to). Plain __tsan_read*/write* are only ever called
// from instrumented code, which cannot run before libc is initialised, and are not gated.
__attribute__((always_inline)) inline bool ready() noexcept {
  return __atomic_load_n(&g_ready, __ATOMIC_ACQUIRE) != 0;
}

__attribute__((always_inline)) inline void* do_memcpy(uintptr_t ip, void* dst, const void* src,
                                                      size_t n) noexcept {
  if (ready()) {
    report_range(ip, src, n, false);
    report_range(ip, dst, n, true);
  }
  copy_forward(dst, src, n);
  return dst;
}
__attribute__((always_inline)) inline void* do_memmove(uintptr_t ip, void* dst, const void* src,
                                                       size_t n) noexcept {
  if (ready()) {
    report_range(ip, src, n, false);
    report_range(ip, dst, n, true);
  }
  move_bytes(dst, src, n);
  return dst;
}
__attribute__((always_inline)) inline void* do_memset(uintptr_t ip, void* dst, int c,
                                                      size_t n) noexcept {
  if (ready()) report_range(ip, dst, n, true);
  fill_bytes(dst, c, n);
  return dst;
}
}  // namespace

WM_API void* __tsan_memcpy(void* dst, const void* src, size_t n) noexcept {
  return do_memcpy(WM_IP(), dst, src, n);
}
WM_API void* __tsan_memmove(void* dst, const void* src, size_t n) noexcept {
  return do_memmove(WM_IP(), dst, src, n);
}
WM_API void* __tsan_memset(void* dst, int c, size_t n) noexcept {
  return do_memset(WM_IP(), dst, c, n);
}
WM_API void* __wrap_memcpy(void* dst, const void* src, size_t n) noexcept {
  return do_memcpy(WM_IP(), dst, src, n);
}
WM_API void* __wrap_memmove(void* dst, const void* src, size_t n) noexcept {
  return do_memmove(WM_IP(), dst, src, n);
}
WM_API void* __wrap_memset(void* dst, int c, size_t n) noexcept {
  return do_memset(WM_IP(), dst, c, n);
}

// _FORTIFY_SOURCE turns calls whose destination size is known into __mem*_chk(..., dst_len); with
// -Wl,--wrap=__memcpy_chk,--wrap=__memmove_chk,--wrap=__memset_chk they come here. An overflow traps
// (glibc would report "buffer overflow detected" and abort; we cannot print async-signal-safely).
WM_API void* __wrap___memcpy_chk(void* dst, const void* src, size_t n, size_t dst_len) noexcept {
  if (n > dst_len) __builtin_trap();
  return do_memcpy(WM_IP(), dst, src, n);
}
WM_API void* __wrap___memmove_chk(void* dst, const void* src, size_t n, size_t dst_len) noexcept {
  if (n > dst_len) __builtin_trap();
  return do_memmove(WM_IP(), dst, src, n);
}
WM_API void* __wrap___memset_chk(void* dst, int c, size_t n, size_t dst_len) noexcept {
  if (n > dst_len) __builtin_trap();
  return do_memset(WM_IP(), dst, c, n);
}

// =====================================================================================================
// Atomics. Types are unsigned: Clang declares every value parameter zeroext and GCC's builtins use
// unsigned integer types, so narrow values arrive zero-extended.
//
//   T    __tsan_atomicN_load(const volatile T*, int mo)
//   void __tsan_atomicN_store(volatile T*, T, int mo)
//   T    __tsan_atomicN_<rmw>(volatile T*, T, int mo)                       (returns the old value)
//   int  __tsan_atomicN_compare_exchange_{strong,weak}(volatile T*, T* expected, T desired,
//                                                       int mo, int fail_mo)      (GCC)
//   T    __tsan_atomicN_compare_exchange_val(volatile T*, T expected, T desired,
//                                             int mo, int fail_mo)                (Clang; old value)
//
// Each reports one access of sizeof(T): loads as reads, stores and read-modify-writes (including a
// failed compare-exchange, which still takes the line exclusive on x86) as writes.

#define WM_ATOMIC_RMW(N, T, OP)                                          \
  WM_API T __tsan_atomic##N##_##OP(volatile T* a, T v, int mo) noexcept { \
    report_access(WM_IP(), a, sizeof(T), true);                          \
    const uint64_t b = sync_before(a, mo);                               \
    const T old = Atomic<T>::OP(a, v, mo);                               \
    sync_after(a, mo, b);                                                \
    return old;                                                          \
  }

#define WM_ATOMIC_WIDTH(N, T)                                                                     \
  WM_API T __tsan_atomic##N##_load(const volatile T* a, int mo) noexcept {                        \
    report_access(WM_IP(), a, sizeof(T), false);                                                  \
    const T v = Atomic<T>::load(a, mo);                                                           \
    sync_after(a, mo, 0);                                                                         \
    return v;                                                                                     \
  }                                                                                               \
  WM_API void __tsan_atomic##N##_store(volatile T* a, T v, int mo) noexcept {                     \
    report_access(WM_IP(), a, sizeof(T), true);                                                   \
    sync_before(a, mo);                                                                           \
    Atomic<T>::store(a, v, mo);                                                                   \
  }                                                                                               \
  WM_ATOMIC_RMW(N, T, exchange)                                                                   \
  WM_ATOMIC_RMW(N, T, fetch_add)                                                                  \
  WM_ATOMIC_RMW(N, T, fetch_sub)                                                                  \
  WM_ATOMIC_RMW(N, T, fetch_and)                                                                  \
  WM_ATOMIC_RMW(N, T, fetch_or)                                                                   \
  WM_ATOMIC_RMW(N, T, fetch_xor)                                                                  \
  WM_ATOMIC_RMW(N, T, fetch_nand)                                                                 \
  WM_API int __tsan_atomic##N##_compare_exchange_strong(volatile T* a, T* c, T v, int mo,         \
                                                        int fail_mo) noexcept {                   \
    report_access(WM_IP(), a, sizeof(T), true);                                                   \
    const uint64_t b = sync_before(a, mo);                                                        \
    const int ok = Atomic<T>::cas(a, c, v, false, mo, fail_mo) ? 1 : 0;                           \
    sync_after(a, ok ? mo : fail_mo, b, ok);                                                      \
    return ok;                                                                                    \
  }                                                                                               \
  WM_API int __tsan_atomic##N##_compare_exchange_weak(volatile T* a, T* c, T v, int mo,           \
                                                      int fail_mo) noexcept {                     \
    report_access(WM_IP(), a, sizeof(T), true);                                                   \
    const uint64_t b = sync_before(a, mo);                                                        \
    const int ok = Atomic<T>::cas(a, c, v, true, mo, fail_mo) ? 1 : 0;                            \
    sync_after(a, ok ? mo : fail_mo, b, ok);                                                      \
    return ok;                                                                                    \
  }                                                                                               \
  WM_API T __tsan_atomic##N##_compare_exchange_val(volatile T* a, T c, T v, int mo,               \
                                                   int fail_mo) noexcept {                        \
    report_access(WM_IP(), a, sizeof(T), true);                                                   \
    const uint64_t b = sync_before(a, mo);                                                        \
    const bool ok = Atomic<T>::cas(a, &c, v, false, mo, fail_mo);                                 \
    sync_after(a, ok ? mo : fail_mo, b, ok);                                                      \
    return c; /* unchanged on success (== old value), current value on failure */               \
  }

WM_ATOMIC_WIDTH(8, uint8_t)
WM_ATOMIC_WIDTH(16, uint16_t)
WM_ATOMIC_WIDTH(32, uint32_t)
WM_ATOMIC_WIDTH(64, uint64_t)
WM_ATOMIC_WIDTH(128, u128)

WM_API void __tsan_atomic_thread_fence(int mo) noexcept {
  switch (base_order(mo)) {
    case kRelaxed: break;
    case kAcquire: __atomic_thread_fence(__ATOMIC_ACQUIRE); break;
    case kRelease: __atomic_thread_fence(__ATOMIC_RELEASE); break;
    case kAcqRel: __atomic_thread_fence(__ATOMIC_ACQ_REL); break;
    default: __atomic_thread_fence(__ATOMIC_SEQ_CST); break;
  }
}

WM_API void __tsan_atomic_signal_fence(int mo) noexcept {
  switch (base_order(mo)) {
    case kRelaxed: break;
    case kAcquire: __atomic_signal_fence(__ATOMIC_ACQUIRE); break;
    case kRelease: __atomic_signal_fence(__ATOMIC_RELEASE); break;
    case kAcqRel: __atomic_signal_fence(__ATOMIC_ACQ_REL); break;
    default: __atomic_signal_fence(__ATOMIC_SEQ_CST); break;
  }
}
