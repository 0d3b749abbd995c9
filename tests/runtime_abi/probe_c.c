/* Symbol-coverage probe (compiled by check.sh, never linked or run): exercises every C construct
 * that makes GCC or Clang emit a distinct __tsan_* entry point, so check.sh can verify that the ABI
 * archive defines everything the compilers reference. Includes constructs the runtime cannot
 * observe (x87 long double, oversized atomics) to document them; see docs/tsan-abi.md. */
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

typedef unsigned __int128 u128;

struct __attribute__((packed)) Packed {
  char c;
  int16_t s;
  int32_t i;
  int64_t l;
  u128 x;
  volatile int32_t vi;
};
struct Big { long a[8]; };
struct Bits { unsigned a : 3, b : 5, c : 13; };

volatile uint8_t v8;
volatile uint16_t v16;
volatile uint32_t v32;
volatile uint64_t v64;
volatile u128 v128;

void loads_stores(uint8_t* a, uint16_t* b, uint32_t* c, uint64_t* d, u128* e) {
  *a += 1; *b += 1; *c += 1; *d += 1; *e += 1;
}
uint64_t loads_only(const uint8_t* a, const uint16_t* b, const uint32_t* c, const uint64_t* d,
                    const u128* e) {
  return *a + *b + *c + *d + (uint64_t)*e;
}
void volatiles(void) { v8 += 1; v16 += 1; v32 += 1; v64 += 1; v128 += 1; }
int64_t packed(struct Packed* p) {
  p->s++; p->i++; p->l++; p->x++; p->vi++;
  return p->c + p->s + p->i + p->l + (int64_t)p->x;
}
void copies(struct Big* a, const struct Big* b) { *a = *b; }
void mem(char* a, const char* b, unsigned long n) {
  memcpy(a, b, n);
  memmove(a + 1, a, n);
  memset(a, 1, n);
  memcpy(a, b, 64);
  __builtin_memcpy(a, b, 32);
}
void bitfields(struct Bits* x) { x->b = x->a + 3; x->c++; }
long double x87(long double* x) { return *x += 1; }

#define STDATOMIC_OPS(T, A)                                                                     \
  _Atomic T A;                                                                                  \
  T A##_ops(T v) {                                                                              \
    T e = v, r = 0;                                                                             \
    r += atomic_load_explicit(&A, memory_order_relaxed);                                       \
    r += atomic_load_explicit(&A, memory_order_consume);                                        \
    r += atomic_load_explicit(&A, memory_order_acquire);                                        \
    r += atomic_load(&A);                                                                       \
    atomic_store_explicit(&A, v, memory_order_relaxed);                                         \
    atomic_store_explicit(&A, v, memory_order_release);                                         \
    atomic_store(&A, v);                                                                        \
    r += atomic_exchange(&A, v);                                                                \
    r += atomic_fetch_add(&A, v);                                                               \
    r += atomic_fetch_sub(&A, v);                                                               \
    r += atomic_fetch_and(&A, v);                                                               \
    r += atomic_fetch_or(&A, v);                                                                \
    r += atomic_fetch_xor(&A, v);                                                               \
    r += atomic_compare_exchange_strong(&A, &e, v);                                             \
    r += atomic_compare_exchange_weak(&A, &e, v);                                               \
    r += atomic_compare_exchange_strong_explicit(&A, &e, v, memory_order_acq_rel,               \
                                                 memory_order_acquire);                         \
    A += v;                                                                                     \
    return r;                                                                                   \
  }
#define BUILTIN_OPS(T, P)                                                                       \
  T P;                                                                                          \
  T P##_ops(T v, int mo) {                                                                      \
    T e = v, r = 0;                                                                             \
    r += __atomic_load_n(&P, __ATOMIC_ACQUIRE);                                                 \
    r += __atomic_load_n(&P, mo);                                                               \
    __atomic_store_n(&P, v, __ATOMIC_RELEASE);                                                  \
    r += __atomic_exchange_n(&P, v, __ATOMIC_ACQ_REL);                                          \
    r += __atomic_fetch_nand(&P, v, __ATOMIC_SEQ_CST);                                          \
    r += __atomic_nand_fetch(&P, v, __ATOMIC_SEQ_CST);                                          \
    r += __atomic_add_fetch(&P, v, __ATOMIC_RELAXED);                                           \
    r += __atomic_compare_exchange_n(&P, &e, v, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);         \
    r += __atomic_compare_exchange_n(&P, &e, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);         \
    r += __sync_val_compare_and_swap(&P, e, v);                                                 \
    r += __sync_bool_compare_and_swap(&P, e, v);                                                \
    r += __sync_fetch_and_add(&P, v);                                                           \
    r += __sync_lock_test_and_set(&P, v);                                                       \
    __sync_lock_release(&P);                                                                    \
    return r;                                                                                   \
  }
STDATOMIC_OPS(uint8_t, a8)
STDATOMIC_OPS(uint16_t, a16)
STDATOMIC_OPS(uint32_t, a32)
STDATOMIC_OPS(uint64_t, a64)
STDATOMIC_OPS(u128, a128)
BUILTIN_OPS(uint8_t, p8)
BUILTIN_OPS(uint16_t, p16)
BUILTIN_OPS(uint32_t, p32)
BUILTIN_OPS(uint64_t, p64)
BUILTIN_OPS(u128, p128)

void fences(void) {
  atomic_thread_fence(memory_order_seq_cst);
  atomic_thread_fence(memory_order_acquire);
  atomic_signal_fence(memory_order_seq_cst);
  __sync_synchronize();
}
int flag(atomic_flag* f) {
  int r = atomic_flag_test_and_set(f);
  atomic_flag_clear(f);
  return r;
}
_Atomic float af;
_Atomic double ad;
double floats(void) { af += 1.0f; ad += 1.0; return af + ad; }
_Atomic struct Big abig;
struct Big big_atomic_load(void) { return atomic_load(&abig); }
