// Interposition of the program's allocation functions: the C allocator and every replaceable
// operator new / delete. Each hook forwards to glibc's own implementation through the
// __libc_* entry points glibc exports for exactly this purpose (no dlsym: it allocates, and is
// unusable before libdl is ready), then records the object in the store.
//
// Routing:
//  * in_runtime() (the runtime's own allocation), t_heap.guard (re-entry from our own
//    bookkeeping, e.g. a signal handler), or a caller inside the runtime's own shared object
//    (code that allocates without being marked inside, above all the C++ library the runtime
//    links statically: its emergency exception pool is allocated when the runtime is loaded,
//    before any of our code runs): served by the private heap, not recorded. The program's heap
//    then holds exactly the blocks it would hold natively (tests/integration/heap_layout.py).
//  * free/realloc route by address: private pointers go to the private heap whoever frees them;
//    other pointers to glibc, after unregistering them (before the real free, so the block cannot
//    be handed out again while its old record still exists).
//  * otherwise: glibc, then, if recording(), register with the thread and the allocation site.
// errno: preserved across the bookkeeping; failures report what glibc (or the standard) says.
// Exceptions: only the throwing operator new forms throw (std::bad_alloc); everything else is
// noexcept. Compiled with frame pointers so that __builtin_frame_address(0) in a hook is the
// frame whose saved %rbp starts the call-site walk (sites.cpp).
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <link.h>
#include <sys/auxv.h>

#include <cstring>
#include <new>

#include "runtime/common/heap_internal.h"

extern "C" {
void* __libc_malloc(size_t) noexcept;
void __libc_free(void*) noexcept;
void* __libc_calloc(size_t, size_t) noexcept;
void* __libc_realloc(void*, size_t) noexcept;
void* __libc_memalign(size_t, size_t) noexcept;
void* __libc_valloc(size_t) noexcept;
void* __libc_pvalloc(size_t) noexcept;
}

#define WM_EXPORT extern "C" __attribute__((visibility("default")))
#define WM_VISIBLE __attribute__((visibility("default")))
// The allocating code: the hook's return address and the hook's frame (start of the walk).
#define WM_CALLER                                           \
  reinterpret_cast<uintptr_t>(__builtin_return_address(0)), \
      reinterpret_cast<uintptr_t>(__builtin_frame_address(0))
#define WM_INLINE __attribute__((always_inline)) inline

namespace {

using whymiss::rt::HeapGuard;
using whymiss::rt::HeapSlot;
using whymiss::rt::t_heap;
namespace rt = whymiss::rt;

constexpr size_t kPageSize = 4096;

// The runtime's shared object, from its ELF header to the end of its bss (both symbols are
// defined by the linker; hidden, so they are this object's own and need no relocation).
extern "C" const char __ehdr_start __attribute__((visibility("hidden")));
extern "C" const char _end __attribute__((visibility("hidden")));

WM_INLINE bool from_runtime(uintptr_t ret) noexcept {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(&__ehdr_start);
  return ret - lo < reinterpret_cast<uintptr_t>(&_end) - lo;
}

// `ret`: the return address of the hook, i.e. the allocating code.
WM_INLINE bool route_private(uintptr_t ret) noexcept {
  return t_heap.guard != 0 || rt::in_runtime() || from_runtime(ret);
}

// ---- thread control blocks: glibc's DTV, at its native size ----
// For every new thread, ld.so calls calloc(max_module_id + 16, 16) for the thread's DTV, on the
// program's heap. The runtime's thread-local variables make it one more TLS module than the
// program has natively, so each such block would be 16 bytes larger than natively and shift every
// later block of the heap by 16 (48 mod 64 becomes 0 mod 64). So ld.so's DTV comes from the
// private heap, and a block of the native size (one entry less) is allocated from glibc in its
// place, held as long as the DTV lives. Bounded: beyond kDtvSlots live DTVs (threads, or stacks
// glibc caches with their DTV) ld.so gets a glibc block as before.
constexpr size_t kDtvEntry = 16;     // sizeof(dtv_t)
constexpr int kRuntimeTlsModules = 1;  // this object (PT_TLS: t_heap and the core's variables)
constexpr int kDtvSlots = 1024;

struct DtvShadow {
  std::atomic<void*> dtv;  // the private block ld.so got (nullptr: free slot); written locked
  void* native;            // the glibc block of the native size
};
rt::HeapLock g_dtv_lock;
DtvShadow g_dtv[kDtvSlots];
std::atomic<int> g_dtv_live{0};
std::atomic<uintptr_t> g_loader_lo{0}, g_loader_hi{0};  // ld.so's mapping; hi == 1: none

// True when `ret` is inside the dynamic loader. Reads the loader's program headers once.
bool from_loader(uintptr_t ret) noexcept {
  uintptr_t hi = g_loader_hi.load(std::memory_order_acquire);
  if (hi == 0) {
    const uintptr_t base = getauxval(AT_BASE);
    uintptr_t end = 0;
    if (base != 0) {
      const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
      const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(base + eh->e_phoff);
      for (int i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_memsz > end) {
          end = ph[i].p_vaddr + ph[i].p_memsz;
        }
      }
    }
    g_loader_lo.store(base, std::memory_order_relaxed);
    hi = end != 0 ? base + end : 1;
    g_loader_hi.store(hi, std::memory_order_release);
  }
  const uintptr_t lo = g_loader_lo.load(std::memory_order_relaxed);
  return ret >= lo && ret < hi;
}

// ld.so's calloc of a DTV: nullptr when it is not one or cannot be shadowed (caller goes on).
void* dtv_calloc(size_t count, size_t each, uintptr_t ret) noexcept {
  if (each != kDtvEntry || count <= kRuntimeTlsModules || count > 4096 || !from_loader(ret)) {
    return nullptr;
  }
  const int saved = errno;
  void* dtv = nullptr;
  {
    HeapGuard guard;
    g_dtv_lock.lock();
    for (DtvShadow& s : g_dtv) {
      if (s.dtv.load(std::memory_order_relaxed) != nullptr) continue;
      dtv = rt::private_alloc(count * each);
      if (dtv == nullptr) break;
      s.native = __libc_calloc(count - kRuntimeTlsModules, each);
      if (s.native == nullptr) {
        rt::private_free(dtv);
        dtv = nullptr;
        break;
      }
      memset(dtv, 0, count * each);
      s.dtv.store(dtv, std::memory_order_relaxed);
      g_dtv_live.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    g_dtv_lock.unlock();
  }
  errno = saved;
  return dtv;
}

// A private block is being freed (q == nullptr) or moved to q by realloc: its shadow goes with it.
// Only a DTV's own thread-exit or resize gets here with p in the table, so the table is scanned
// without the lock first (the runtime's other private frees never take it).
void dtv_forget(void* p, void* q) noexcept {
  if (g_dtv_live.load(std::memory_order_relaxed) == 0) return;
  bool listed = false;
  for (const DtvShadow& s : g_dtv) {
    if (s.dtv.load(std::memory_order_relaxed) == p) {
      listed = true;
      break;
    }
  }
  if (!listed) return;
  void* native = nullptr;
  {
    HeapGuard guard;
    g_dtv_lock.lock();
    for (DtvShadow& s : g_dtv) {
      if (s.dtv.load(std::memory_order_relaxed) != p) continue;
      if (q != nullptr) {
        s.dtv.store(q, std::memory_order_relaxed);
      } else {
        native = s.native;
        s.native = nullptr;
        s.dtv.store(nullptr, std::memory_order_relaxed);
        g_dtv_live.fetch_sub(1, std::memory_order_relaxed);
      }
      break;
    }
    g_dtv_lock.unlock();
  }
  if (native != nullptr) __libc_free(native);
}

}  // namespace

// fork() while another thread holds the DTV table's lock: held across fork (before the private
// heap's locks, the order dtv_calloc takes them in), reset in the child.
void whymiss::rt::dtv_before_fork() noexcept { g_dtv_lock.lock(); }
void whymiss::rt::dtv_after_fork_parent() noexcept { g_dtv_lock.unlock(); }
void whymiss::rt::dtv_after_fork_child() noexcept { g_dtv_lock.reset(); }

namespace {

// Private-heap allocation with malloc's failure convention.
WM_INLINE void* private_or_enomem(void* p) noexcept {
  if (p == nullptr) errno = ENOMEM;
  return p;
}

// Registers a fresh block of the program's. Out of line: the common case only tests flags.
__attribute__((noinline)) void track(void* p, size_t n, uintptr_t ret, uintptr_t fp) noexcept {
  const int saved = errno;
  {
    HeapGuard guard;
    const uint32_t thread = rt::current_thread_index();
    const uint32_t site = rt::capture_site(ret, fp);
    rt::store_register(reinterpret_cast<uintptr_t>(p), n, thread, site);
  }
  errno = saved;
}

WM_INLINE void maybe_track(void* p, size_t n, uintptr_t ret, uintptr_t fp) noexcept {
  if (p != nullptr && n != 0 && rt::recording()) track(p, n, ret, fp);
}

__attribute__((noinline)) void untrack(void* p) noexcept {
  rt::heap_detach_fence();
  const int saved = errno;
  {
    HeapGuard guard;
    rt::store_release(rt::store_detach(reinterpret_cast<uintptr_t>(p)));
  }
  errno = saved;
}

WM_INLINE void* malloc_impl(size_t n, uintptr_t ret, uintptr_t fp) noexcept {
  if (route_private(ret)) return private_or_enomem(rt::private_alloc(n));
  void* p = __libc_malloc(n);
  maybe_track(p, n, ret, fp);
  return p;
}

WM_INLINE void free_impl(void* p) noexcept {
  if (p == nullptr) return;
  if (rt::is_private(p)) {
    dtv_forget(p, nullptr);
    rt::private_free(p);
    return;
  }
  if (rt::store_active() && t_heap.guard == 0) untrack(p);
  __libc_free(p);
}

// Power of two >= a (and >= 16); 0 when there is none.
WM_INLINE size_t pow2_align(size_t a) noexcept {
  if (a <= 16) return 16;
  if (a > (~size_t{0} >> 1) + 1) return 0;
  return size_t{1} << (64 - __builtin_clzll(a - 1));
}

// memalign semantics (any alignment, rounded up to a power of two by glibc).
WM_INLINE void* memalign_impl(size_t align, size_t n, uintptr_t ret, uintptr_t fp) noexcept {
  if (route_private(ret)) {
    const size_t a = pow2_align(align);
    if (a == 0) {
      errno = EINVAL;
      return nullptr;
    }
    return private_or_enomem(rt::private_alloc_aligned(n, a));
  }
  void* p = __libc_memalign(align, n);
  maybe_track(p, n, ret, fp);
  return p;
}

WM_INLINE void* realloc_impl(void* p, size_t n, uintptr_t ret, uintptr_t fp) noexcept {
  if (p == nullptr) return malloc_impl(n, ret, fp);
  if (rt::is_private(p)) {
    if (n == 0) {  // glibc's realloc(p, 0) frees p and returns nullptr; do the same
      dtv_forget(p, nullptr);
      rt::private_free(p);
      return nullptr;
    }
    void* q = rt::private_realloc(p, n);
    if (q != nullptr) dtv_forget(p, q);
    return private_or_enomem(q);
  }
  HeapSlot* old = nullptr;
  if (rt::store_active() && t_heap.guard == 0) {
    rt::heap_detach_fence();
    const int saved = errno;
    {
      HeapGuard guard;
      old = rt::store_detach(reinterpret_cast<uintptr_t>(p));
    }
    errno = saved;
  }
  void* q = __libc_realloc(p, n);
  if (old != nullptr) {
    const int saved = errno;
    {
      HeapGuard guard;
      if (q != nullptr || n == 0) {
        rt::store_release(old);  // moved, resized in place, or freed by realloc(p, 0)
      } else {
        rt::store_reattach(old);  // failed: p is still the program's
      }
    }
    errno = saved;
  }
  // A resize requested by the runtime itself keeps the block in glibc but unrecorded.
  if (!route_private(ret)) maybe_track(q, n, ret, fp);
  return q;
}

// The failure paths of operator new use the program's C++ runtime (libstdc++.so, loaded by every
// program that calls operator new), never the copy linked statically into the runtime: the
// program's std::set_new_handler sets the handler there, and an exception must be thrown and
// caught by one runtime (each keeps its own count of uncaught exceptions). Looked up only when an
// allocation has failed; our own copy serves only if the program has no C++ runtime at all.
std::new_handler program_new_handler() noexcept {
  using Get = std::new_handler (*)();
  const auto get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv"));
  return get != nullptr ? get() : std::get_new_handler();
}

[[noreturn]] __attribute__((noinline, cold)) void throw_bad_alloc() {
  using Throw = void (*)();
  if (const auto fn = reinterpret_cast<Throw>(dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv"))) {
    fn();
  }
  throw std::bad_alloc();
}

// operator new: retry through the new-handler until it gives up (throws or is absent).
WM_INLINE void* new_impl(size_t n, size_t align, uintptr_t ret, uintptr_t fp) {
  for (;;) {
    void* p = align == 0 ? malloc_impl(n, ret, fp) : memalign_impl(align, n, ret, fp);
    if (p != nullptr) return p;
    std::new_handler handler = program_new_handler();
    if (handler == nullptr) throw_bad_alloc();
    handler();
  }
}

// The nothrow forms: when the allocation failed and a handler is installed, the handler may
// throw, and only the program's C++ runtime may catch that: its nothrow operator new (which calls
// our throwing one in a try block) does the retries.
__attribute__((noinline, cold)) void* program_nothrow_new(size_t n, size_t align) noexcept {
  if (align == 0) {
    using New = void* (*)(size_t, const std::nothrow_t&) noexcept;
    const auto fn = reinterpret_cast<New>(dlsym(RTLD_NEXT, "_ZnwmRKSt9nothrow_t"));
    return fn != nullptr ? fn(n, std::nothrow) : nullptr;
  }
  using New = void* (*)(size_t, std::align_val_t, const std::nothrow_t&) noexcept;
  const auto fn = reinterpret_cast<New>(dlsym(RTLD_NEXT, "_ZnwmSt11align_val_tRKSt9nothrow_t"));
  return fn != nullptr ? fn(n, static_cast<std::align_val_t>(align), std::nothrow) : nullptr;
}

WM_INLINE void* new_nothrow_impl(size_t n, size_t align, uintptr_t ret, uintptr_t fp) noexcept {
  void* p = align == 0 ? malloc_impl(n, ret, fp) : memalign_impl(align, n, ret, fp);
  if (p != nullptr || program_new_handler() == nullptr) return p;
  return program_nothrow_new(n, align);
}

// glibc 2.36 chunk layout, for malloc_usable_size (glibc does not export it under a __libc_
// name): the word before the payload holds the chunk size | flags (bit 1: mmapped). An mmapped
// chunk gives size - 16 bytes, a heap chunk size - 8 (it may use the next chunk's prev_size
// field), and only if in use (bit 0 of the next chunk's size word).
size_t glibc_usable_size(void* p) noexcept {
  const size_t head = static_cast<const size_t*>(p)[-1];
  const size_t size = head & ~size_t{7};
  if ((head & 2) != 0) return size - 16;
  const size_t next_head = *reinterpret_cast<const size_t*>(static_cast<char*>(p) - 8 + size);
  return (next_head & 1) != 0 ? size - 8 : 0;
}

}  // namespace

// ---- C allocator ----

WM_EXPORT void* malloc(size_t n) noexcept {
  return malloc_impl(n, WM_CALLER);
}

WM_EXPORT void free(void* p) noexcept {
  free_impl(p);
}

WM_EXPORT void* calloc(size_t count, size_t each) noexcept {
  size_t n;
  if (route_private(reinterpret_cast<uintptr_t>(__builtin_return_address(0)))) {
    if (__builtin_mul_overflow(count, each, &n)) {
      errno = ENOMEM;
      return nullptr;
    }
    return private_or_enomem(rt::private_alloc_zeroed(n));
  }
  if (void* dtv = dtv_calloc(count, each, reinterpret_cast<uintptr_t>(__builtin_return_address(0)))) {
    return dtv;
  }
  void* p = __libc_calloc(count, each);
  if (p != nullptr) maybe_track(p, count * each, WM_CALLER);
  return p;
}

WM_EXPORT void* realloc(void* p, size_t n) noexcept {
  return realloc_impl(p, n, WM_CALLER);
}

WM_EXPORT void* reallocarray(void* p, size_t count, size_t each) noexcept {
  size_t n;
  if (__builtin_mul_overflow(count, each, &n)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc_impl(p, n, WM_CALLER);
}

WM_EXPORT int posix_memalign(void** out, size_t align, size_t n) noexcept {
  if (align == 0 || (align & (align - 1)) != 0 || align % sizeof(void*) != 0) return EINVAL;
  const int saved = errno;  // posix_memalign reports through its result only
  void* p = memalign_impl(align, n, WM_CALLER);
  errno = saved;
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

WM_EXPORT void* aligned_alloc(size_t align, size_t n) noexcept {
  if (align == 0 || (align & (align - 1)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  return memalign_impl(align, n, WM_CALLER);
}

WM_EXPORT void* memalign(size_t align, size_t n) noexcept {
  return memalign_impl(align, n, WM_CALLER);
}

WM_EXPORT void* valloc(size_t n) noexcept {
  if (route_private(reinterpret_cast<uintptr_t>(__builtin_return_address(0)))) return private_or_enomem(rt::private_alloc_aligned(n, kPageSize));
  void* p = __libc_valloc(n);
  maybe_track(p, n, WM_CALLER);
  return p;
}

WM_EXPORT void* pvalloc(size_t n) noexcept {
  if (n > ~size_t{0} - kPageSize) {
    errno = ENOMEM;
    return nullptr;
  }
  const size_t rounded = (n + kPageSize - 1) & ~(kPageSize - 1);
  if (route_private(reinterpret_cast<uintptr_t>(__builtin_return_address(0)))) {
    return private_or_enomem(rt::private_alloc_aligned(rounded == 0 ? 1 : rounded, kPageSize));
  }
  void* p = __libc_pvalloc(n);
  maybe_track(p, rounded, WM_CALLER);
  return p;
}

WM_EXPORT size_t malloc_usable_size(void* p) noexcept {
  if (p == nullptr) return 0;
  if (rt::is_private(p)) return rt::private_usable_size(p);
  return glibc_usable_size(p);
}

// ---- C++ replaceable allocation functions ----

WM_VISIBLE void* operator new(size_t n) {
  return new_impl(n, 0, WM_CALLER);
}
WM_VISIBLE void* operator new[](size_t n) {
  return new_impl(n, 0, WM_CALLER);
}
WM_VISIBLE void* operator new(size_t n, const std::nothrow_t&) noexcept {
  return new_nothrow_impl(n, 0, WM_CALLER);
}
WM_VISIBLE void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  return new_nothrow_impl(n, 0, WM_CALLER);
}
WM_VISIBLE void* operator new(size_t n, std::align_val_t a) {
  return new_impl(n, static_cast<size_t>(a), WM_CALLER);
}
WM_VISIBLE void* operator new[](size_t n, std::align_val_t a) {
  return new_impl(n, static_cast<size_t>(a), WM_CALLER);
}
WM_VISIBLE void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_nothrow_impl(n, static_cast<size_t>(a), WM_CALLER);
}
WM_VISIBLE void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_nothrow_impl(n, static_cast<size_t>(a), WM_CALLER);
}

WM_VISIBLE void operator delete(void* p) noexcept {
  free_impl(p);
}
WM_VISIBLE void operator delete[](void* p) noexcept {
  free_impl(p);
}
WM_VISIBLE void operator delete(void* p, const std::nothrow_t&) noexcept {
  free_impl(p);
}
WM_VISIBLE void operator delete[](void* p, const std::nothrow_t&) noexcept {
  free_impl(p);
}
WM_VISIBLE void operator delete(void* p, size_t) noexcept {
  free_impl(p);
}
WM_VISIBLE void operator delete[](void* p, size_t) noexcept {
  free_impl(p);
}
WM_VISIBLE void operator delete(void* p, std::align_val_t) noexcept {
  free_impl(p);
}
WM_VISIBLE void operator delete[](void* p, std::align_val_t) noexcept {
  free_impl(p);
}
WM_VISIBLE void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  free_impl(p);
}
WM_VISIBLE void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  free_impl(p);
}
WM_VISIBLE void operator delete(void* p, size_t, std::align_val_t) noexcept {
  free_impl(p);
}
WM_VISIBLE void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  free_impl(p);
}
