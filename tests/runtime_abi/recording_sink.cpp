// Test implementation of the exact-mode sink (src/runtime/exact/access_sink.h): counts accesses into
// static arrays with relaxed atomics. No allocation, no locks, no libc or libstdc++ calls, so it is
// async-signal-safe and links into C programs. Built WITHOUT -fsanitize=thread.
#include "recording_sink.h"

#include "runtime/exact/access_sink.h"

namespace {

struct State {
  uintptr_t lo, hi;  // window
  uint64_t inits;
  uint64_t total_access[2];
  uint64_t total_range[2];
  uint64_t win_access[2][17];
  uint64_t win_access_bytes[2];
  uint64_t win_range[2];
  uint64_t win_range_bytes[2];
  uint64_t enter_tries_inside, entered_inside;
  uint64_t log_count;
  rec_event log[REC_LOG_MAX];
};

State g;  // zero-initialised, no constructor

inline void add(uint64_t* p, uint64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline uint64_t get(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

void log_event(uintptr_t ip, uintptr_t addr, uint64_t size, uint32_t kind) {
  uint64_t i = __atomic_fetch_add(&g.log_count, 1, __ATOMIC_RELAXED);
  if (i >= REC_LOG_MAX) return;
  rec_event& e = g.log[i];
  __atomic_store_n(&e.ip, ip, __ATOMIC_RELAXED);
  __atomic_store_n(&e.addr, addr, __ATOMIC_RELAXED);
  __atomic_store_n(&e.size, size, __ATOMIC_RELAXED);
  __atomic_store_n(&e.kind, kind, __ATOMIC_RELAXED);
}

}  // namespace

namespace whymiss::rt {

void on_init() noexcept { add(&g.inits, 1); }

// The ABI tests check accesses, not ordering between threads.
uint64_t sync_before(uintptr_t, bool) noexcept { return 0; }
void sync_after(uintptr_t) noexcept {}
void sync_undo(uintptr_t, uint64_t) noexcept {}

void on_access(uintptr_t ip, uintptr_t addr, uint32_t size, bool write) noexcept {
  const int w = write ? 1 : 0;
  add(&g.total_access[w], 1);
  add(&g.enter_tries_inside, 1);
  if (enter_sink()) {
    add(&g.entered_inside, 1);
    leave_sink();
  }
  uintptr_t lo = __atomic_load_n(&g.lo, __ATOMIC_RELAXED);
  uintptr_t hi = __atomic_load_n(&g.hi, __ATOMIC_RELAXED);
  if (addr < lo || addr >= hi || hi - addr < size) return;
  add(&g.win_access[w][size >= 1 && size <= 16 ? size : 0], 1);
  add(&g.win_access_bytes[w], size);
  log_event(ip, addr, size, write ? REC_WRITE : REC_READ);
}

void on_range(uintptr_t ip, uintptr_t addr, size_t size, bool write) noexcept {
  const int w = write ? 1 : 0;
  add(&g.total_range[w], 1);
  uintptr_t lo = __atomic_load_n(&g.lo, __ATOMIC_RELAXED);
  uintptr_t hi = __atomic_load_n(&g.hi, __ATOMIC_RELAXED);
  uintptr_t end = addr + size;
  uintptr_t a = addr > lo ? addr : lo;
  uintptr_t b = end < hi ? end : hi;
  if (size == 0 || a >= b) return;
  add(&g.win_range[w], 1);
  add(&g.win_range_bytes[w], b - a);
  log_event(ip, addr, size, write ? REC_RANGE_WRITE : REC_RANGE_READ);
}

}  // namespace whymiss::rt

extern "C" void rec_watch(const volatile void* lo, size_t len) {
  __atomic_store_n(&g.hi, uintptr_t{0}, __ATOMIC_SEQ_CST);  // close the window while clearing
  for (auto& row : g.win_access)
    for (auto& c : row) __atomic_store_n(&c, uint64_t{0}, __ATOMIC_RELAXED);
  for (int w = 0; w < 2; ++w) {
    __atomic_store_n(&g.win_access_bytes[w], uint64_t{0}, __ATOMIC_RELAXED);
    __atomic_store_n(&g.win_range[w], uint64_t{0}, __ATOMIC_RELAXED);
    __atomic_store_n(&g.win_range_bytes[w], uint64_t{0}, __ATOMIC_RELAXED);
  }
  __atomic_store_n(&g.log_count, uint64_t{0}, __ATOMIC_RELAXED);
  uintptr_t l = reinterpret_cast<uintptr_t>(lo);
  __atomic_store_n(&g.lo, l, __ATOMIC_SEQ_CST);
  __atomic_store_n(&g.hi, l + len, __ATOMIC_SEQ_CST);
}

extern "C" int rec_enter_outside(void) {
  if (!whymiss::rt::enter_sink()) return 0;
  const bool nested = whymiss::rt::enter_sink();
  whymiss::rt::leave_sink();
  if (nested) return 0;
  if (!whymiss::rt::enter_sink()) return 0;
  whymiss::rt::leave_sink();
  return 1;
}

extern "C" void rec_snapshot(rec_stats* out) {
  // Field by field with plain loops: a struct copy could become a call to memcpy, which the test
  // programs wrap (--wrap=memcpy) and which would then be reported.
  out->inits = get(&g.inits);
  out->enter_tries_inside = get(&g.enter_tries_inside);
  out->entered_inside = get(&g.entered_inside);
  for (int w = 0; w < 2; ++w) {
    out->total_access[w] = get(&g.total_access[w]);
    out->total_range[w] = get(&g.total_range[w]);
    for (int s = 0; s < 17; ++s) out->win_access[w][s] = get(&g.win_access[w][s]);
    out->win_access_bytes[w] = get(&g.win_access_bytes[w]);
    out->win_range[w] = get(&g.win_range[w]);
    out->win_range_bytes[w] = get(&g.win_range_bytes[w]);
  }
  uint64_t n = get(&g.log_count);
  out->log_count = n;
  if (n > REC_LOG_MAX) n = REC_LOG_MAX;
  for (uint64_t i = 0; i < n; ++i) {
    out->log[i].ip = __atomic_load_n(&g.log[i].ip, __ATOMIC_RELAXED);
    out->log[i].addr = __atomic_load_n(&g.log[i].addr, __ATOMIC_RELAXED);
    out->log[i].size = __atomic_load_n(&g.log[i].size, __ATOMIC_RELAXED);
    out->log[i].kind = __atomic_load_n(&g.log[i].kind, __ATOMIC_RELAXED);
  }
}
