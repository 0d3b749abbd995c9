/* C side of the ABI proof: compiled with -fsanitize=thread by gcc AND clang (see check.sh), linked
 * against whymiss_tsan_abi + the recording sink instead of libtsan, run, and checked from the sink's
 * counters. Prints "PASS" and exits 0 on success. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recording_sink.h"

#if defined(__clang__)
#define NOIPA __attribute__((noinline, used))
#else
#define NOIPA __attribute__((noipa, used))
#endif

typedef unsigned __int128 u128;

static int failures;
static const char* g_section = "";

#define CHECK(cond)                                                                       \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "%s:%d [%s]: CHECK failed: %s\n", __FILE__, __LINE__, g_section, #cond); \
      failures++;                                                                         \
    }                                                                                     \
  } while (0)

#define CHECK_EQ(a, b)                                                                        \
  do {                                                                                        \
    unsigned long long va_ = (unsigned long long)(a), vb_ = (unsigned long long)(b);          \
    if (va_ != vb_) {                                                                         \
      fprintf(stderr, "%s:%d [%s]: CHECK_EQ failed: %s == %s (%llu vs %llu)\n", __FILE__,     \
              __LINE__, g_section, #a, #b, va_, vb_);                                         \
      failures++;                                                                             \
    }                                                                                         \
  } while (0)

static struct rec_stats st;

static void snap(void) { rec_snapshot(&st); }

/* Is there a logged window event at exactly (addr, size) whose kind is in kind_mask? */
static int logged(const volatile void* addr, uint64_t size, unsigned kind_mask) {
  uint64_t n = st.log_count < REC_LOG_MAX ? st.log_count : REC_LOG_MAX;
  for (uint64_t i = 0; i < n; i++)
    if (st.log[i].addr == (uintptr_t)addr && st.log[i].size == size &&
        ((kind_mask >> st.log[i].kind) & 1u))
      return 1;
  return 0;
}
#define K_R (1u << REC_READ)
#define K_W (1u << REC_WRITE)
#define K_RR (1u << REC_RANGE_READ)
#define K_RW (1u << REC_RANGE_WRITE)

/* ------------------------------------------------------------------------------------------------ */
enum { N = 100 };
static uint64_t buf64[N];
static uint32_t buf32[N];

NOIPA void store_loop(volatile uint64_t* p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = i * 3;
}
NOIPA uint64_t load_loop(const volatile uint32_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; i++) s += p[i];
  return s;
}
NOIPA void plain_store_loop(uint64_t* p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = i + 7;
}

static void test_plain_accesses(void) {
  g_section = "8-byte store loop";
  rec_watch(buf64, sizeof buf64);
  store_loop(buf64, N);
  snap();
  CHECK_EQ(st.win_access[1][8], N);
  CHECK_EQ(st.win_access[0][8], 0);
  int all = 1, ip_ok = 1;
  for (int i = 0; i < N; i++) {
    all &= logged(&buf64[i], 8, K_W);
    CHECK_EQ(buf64[i], (uint64_t)i * 3);
  }
  CHECK(all);
  /* ip is the return address of the __tsan_write8 call: inside store_loop's code. */
  uintptr_t fn = (uintptr_t)&store_loop;
  for (uint64_t i = 0; i < st.log_count && i < REC_LOG_MAX; i++)
    ip_ok &= st.log[i].ip > fn && st.log[i].ip < fn + 1024;
  CHECK(ip_ok);

  g_section = "4-byte load loop";
  for (int i = 0; i < N; i++) buf32[i] = (uint32_t)i;
  rec_watch(buf32, sizeof buf32);
  CHECK_EQ(load_loop(buf32, N), (uint64_t)N * (N - 1) / 2);
  snap();
  CHECK_EQ(st.win_access[0][4], N);
  CHECK_EQ(st.win_access[1][4], 0);

  g_section = "plain (possibly vectorised) store loop";
  rec_watch(buf64, sizeof buf64);
  plain_store_loop(buf64, N);
  snap();
  /* The optimiser may vectorise (16-byte stores) or call memset-like helpers: count bytes. */
  CHECK(st.win_access_bytes[1] + st.win_range_bytes[1] >= sizeof buf64);
  for (int i = 0; i < N; i++) CHECK_EQ(buf64[i], (uint64_t)i + 7);
}

/* ------------------------------------------------------------------------------------------------ */
static struct {
  volatile uint8_t b1;
  volatile uint16_t b2;
  volatile uint32_t b4;
  volatile uint64_t b8;
  volatile u128 b16;
} sized;
static u128 plain16[2];

NOIPA void store16(u128* p, u128 v) { *p = v; }
NOIPA u128 load16(const u128* p) { return *p; }

static void test_sizes(void) {
  g_section = "access sizes 1/2/4/8/16";
  rec_watch(&sized, sizeof sized);
  sized.b1 = 1;
  sized.b2 = 2;
  sized.b4 = 4;
  sized.b8 = 8;
  sized.b16 = ((u128)16 << 64) | 16;
  uint64_t sum = sized.b1 + sized.b2 + sized.b4 + sized.b8 + (uint64_t)(sized.b16 >> 64);
  snap();
  CHECK_EQ(sum, 1 + 2 + 4 + 8 + 16);
  static const unsigned sizes[] = {1, 2, 4, 8, 16};
  for (int i = 0; i < 5; i++) {
    CHECK_EQ(st.win_access[1][sizes[i]], 1);
    CHECK_EQ(st.win_access[0][sizes[i]], 1);
  }
  CHECK(logged(&sized.b16, 16, K_W));
  CHECK(logged(&sized.b16, 16, K_R));

  g_section = "non-volatile 16-byte";
  rec_watch(plain16, sizeof plain16);
  store16(&plain16[1], ((u128)0xabcdef << 64) | 0x1234);
  u128 v = load16(&plain16[1]);
  snap();
  CHECK(v == (((u128)0xabcdef << 64) | 0x1234));
  CHECK(logged(&plain16[1], 16, K_W));
  CHECK(logged(&plain16[1], 16, K_R));
}

/* ------------------------------------------------------------------------------------------------ */
struct __attribute__((packed)) Packed {
  char c;
  uint32_t i;
  uint64_t l;
  uint16_t s;
};
static struct Packed pk;

NOIPA void packed_store(struct Packed* p, uint32_t a, uint64_t b, uint16_t c) {
  p->i = a;
  p->l = b;
  p->s = c;
}

struct Bits {
  unsigned a : 3, b : 5, c : 13;
};
static struct Bits bits;
NOIPA void bits_update(struct Bits* x) {
  x->b = 17;
  x->c = 4000;
}

struct Big {
  uint64_t a[8];
};
static struct Big bigs[2];
NOIPA void copy_big(struct Big* d, const struct Big* s) { *d = *s; }

static void test_layouts(int wrapped) {
  g_section = "packed (unaligned) fields";
  rec_watch(&pk, sizeof pk);
  packed_store(&pk, 0x11223344u, 0x5566778899aabbccull, 0xddeeu);
  snap();
  const char* base = (const char*)&pk;
  /* Clang: __tsan_unaligned_writeN; GCC: __tsan_write_range(addr, N). Either is fine. */
  CHECK(logged(base + offsetof(struct Packed, i), 4, K_W | K_RW));
  CHECK(logged(base + offsetof(struct Packed, l), 8, K_W | K_RW));
  CHECK(logged(base + offsetof(struct Packed, s), 2, K_W | K_RW));
  CHECK_EQ(pk.i, 0x11223344u);
  CHECK_EQ(pk.l, 0x5566778899aabbccull);
  CHECK_EQ(pk.s, 0xddeeu);

  g_section = "bitfields";
  rec_watch(&bits, sizeof bits);
  bits_update(&bits);
  snap();
  CHECK(st.win_access_bytes[1] + st.win_range_bytes[1] >= 1);
  CHECK_EQ(bits.b, 17);
  CHECK_EQ(bits.c, 4000);

  g_section = "struct copy";
  for (int i = 0; i < 8; i++) bigs[0].a[i] = 100 + i;
  rec_watch(bigs, sizeof bigs);
  copy_big(&bigs[1], &bigs[0]);
  snap();
  /* GCC: read/write_range(64); Clang: a memcpy call (reported only when wrapped). */
  if (wrapped) {
    CHECK(st.win_access_bytes[0] + st.win_range_bytes[0] >= sizeof(struct Big));
    CHECK(st.win_access_bytes[1] + st.win_range_bytes[1] >= sizeof(struct Big));
  }
  for (int i = 0; i < 8; i++) CHECK_EQ(bigs[1].a[i], 100 + i);
}

/* ------------------------------------------------------------------------------------------------ */
static unsigned char mem[8192];
static unsigned char ref[8192];
static volatile size_t vn = 1000; /* run-time sizes: keep the calls real calls */

static void ref_move(unsigned char* d, const unsigned char* s, size_t n) {
  unsigned char tmp[4096];
  for (size_t i = 0; i < n; i++) tmp[i] = s[i];
  for (size_t i = 0; i < n; i++) d[i] = tmp[i];
}

void* __tsan_memcpy(void* dst, const void* src, size_t n);
void* __tsan_memset(void* dst, int c, size_t n);
void* __tsan_memmove(void* dst, const void* src, size_t n);

static void test_memfuncs(int wrapped) {
  unsigned char* src = mem;
  unsigned char* dst = mem + 4096;
  size_t n = vn;
  for (size_t i = 0; i < sizeof mem; i++) mem[i] = (unsigned char)(i * 7 + 1);

  g_section = "memcpy";
  rec_watch(mem, sizeof mem);
  void* r = memcpy(dst, src, n);
  snap();
  CHECK(r == dst);
  CHECK(memcmp(dst, src, n) == 0);
  if (wrapped) {
    CHECK(logged(src, n, K_RR));
    CHECK(logged(dst, n, K_RW));
  }

  /* A constant size: GCC expands this inline, uninstrumented, unless built with
   * -fno-builtin-memcpy (see docs/tsan-abi.md); Clang keeps the call. GCC's fortified memcpy wrapper
   * calls __builtin___memcpy_chk, which -fno-builtin-memcpy does not cover: the same blind spot. */
#if !defined(__clang__) && defined(__OPTIMIZE__) && defined(_FORTIFY_SOURCE) && _FORTIFY_SOURCE > 0
  const int const_size_visible = 0;
#else
  const int const_size_visible = 1;
#endif
  g_section = "memcpy, constant size 64";
  rec_watch(mem, sizeof mem);
  memcpy(dst + 100, src + 100, 64);
  snap();
  CHECK(memcmp(dst + 100, src + 100, 64) == 0);
  if (wrapped && const_size_visible) {
    CHECK(logged(src + 100, 64, K_RR));
    CHECK(logged(dst + 100, 64, K_RW));
  }

  g_section = "memset";
  rec_watch(mem, sizeof mem);
  r = memset(dst, 0xab, n);
  snap();
  CHECK(r == dst);
  int ok = 1;
  for (size_t i = 0; i < n; i++) ok &= dst[i] == 0xab;
  CHECK(ok);
  if (wrapped) CHECK(logged(dst, n, K_RW));

  /* memmove in every overlap shape: dst above src (tiny and large distance), dst below src. */
  static const long shifts[] = {1, 3, 63, 64, 100, 999, -1, -100, 2000};
  for (unsigned k = 0; k < sizeof shifts / sizeof shifts[0]; k++) {
    g_section = "memmove";
    for (size_t i = 0; i < sizeof mem; i++) mem[i] = ref[i] = (unsigned char)(i * 13 + k);
    unsigned char* s = mem + 3000;
    unsigned char* d = s + shifts[k];
    ref_move(ref + 3000 + shifts[k], ref + 3000, n);
    rec_watch(mem, sizeof mem);
    r = memmove(d, s, n);
    snap();
    CHECK(r == d);
    CHECK(memcmp(mem, ref, sizeof mem) == 0);
    if (wrapped) {
      CHECK(logged(s, n, K_RR));
      CHECK(logged(d, n, K_RW));
    }
  }

  g_section = "__tsan_memcpy/memset/memmove (newer LLVM ABI)";
  for (size_t i = 0; i < sizeof mem; i++) mem[i] = ref[i] = (unsigned char)(i * 5);
  rec_watch(mem, sizeof mem);
  CHECK(__tsan_memcpy(dst, src, n) == dst);
  CHECK(__tsan_memset(src, 7, 10) == src);
  CHECK(__tsan_memmove(src + 1, src, 100) == src + 1);
  snap();
  CHECK(logged(src, n, K_RR));
  CHECK(logged(dst, n, K_RW));
  CHECK(logged(src, 10, K_RW));
  CHECK(logged(src, 100, K_RR));
  CHECK(logged(src + 1, 100, K_RW));
  CHECK(memcmp(dst, ref, n) == 0);
  CHECK(src[0] == 7 && src[10] == 7 && src[11] == ref[10]);
}

/* ------------------------------------------------------------------------------------------------ */
/* C11 <stdatomic.h> on _Atomic objects, then the GCC __atomic/__sync builtins on plain objects.
 * Exact access counts: loads are reads, everything else one write of sizeof(T). */
#define ATOMIC_WIDTH_TEST(T, NAME)                                                           \
  static _Atomic T NAME##_a;                                                                 \
  static T NAME##_p;                                                                         \
  NOIPA static void test_atomic_##NAME(void) {                                               \
    g_section = "stdatomic " #T;                                                             \
    rec_watch(&NAME##_a, sizeof NAME##_a);                                                   \
    atomic_store_explicit(&NAME##_a, 10, memory_order_relaxed);                              \
    CHECK_EQ(atomic_load_explicit(&NAME##_a, memory_order_acquire), 10);                     \
    CHECK_EQ(atomic_load_explicit(&NAME##_a, memory_order_consume), 10);                     \
    CHECK_EQ(atomic_exchange(&NAME##_a, 20), 10);                                            \
    CHECK_EQ(atomic_fetch_add(&NAME##_a, 5), 20);                                            \
    CHECK_EQ(atomic_fetch_sub_explicit(&NAME##_a, 3, memory_order_release), 25);             \
    CHECK_EQ(atomic_fetch_and_explicit(&NAME##_a, 0x16, memory_order_acq_rel), 22);          \
    CHECK_EQ(atomic_fetch_or(&NAME##_a, 0x21), 0x16);                                        \
    CHECK_EQ(atomic_fetch_xor(&NAME##_a, 0x0f), 0x37);                                       \
    T e = 0x38;                                                                              \
    CHECK(atomic_compare_exchange_strong(&NAME##_a, &e, 70));                                \
    CHECK_EQ(e, 0x38);                                                                       \
    e = 1;                                                                                   \
    CHECK(!atomic_compare_exchange_strong_explicit(&NAME##_a, &e, 80, memory_order_acq_rel,  \
                                                   memory_order_acquire));                   \
    CHECK_EQ(e, 70);                                                                         \
    e = 70;                                                                                  \
    CHECK(atomic_compare_exchange_weak_explicit(&NAME##_a, &e, 90, memory_order_release,     \
                                                memory_order_relaxed));                      \
    CHECK_EQ(atomic_load(&NAME##_a), 90);                                                    \
    snap();                                                                                  \
    CHECK_EQ(st.win_access[0][sizeof(T)], 3);                                                \
    CHECK_EQ(st.win_access[1][sizeof(T)], 10);                                               \
    CHECK_EQ(st.win_access_bytes[0] + st.win_access_bytes[1], 13 * sizeof(T));               \
                                                                                             \
    g_section = "__atomic/__sync builtins " #T;                                              \
    rec_watch(&NAME##_p, sizeof NAME##_p);                                                   \
    unsigned writes = 0;                                                                     \
    __atomic_store_n(&NAME##_p, (T)0xf0, __ATOMIC_RELEASE); writes++;                        \
    CHECK_EQ(__atomic_fetch_nand(&NAME##_p, (T)0x3c, __ATOMIC_SEQ_CST), 0xf0); writes++;     \
    T x = (T) ~(T)0x30;                                                                      \
    CHECK(__atomic_load_n(&NAME##_p, __ATOMIC_ACQUIRE) == x);                                \
    CHECK(__atomic_add_fetch(&NAME##_p, 1, __ATOMIC_RELAXED) == (T)(x + 1)); writes++;       \
    CHECK(__sync_val_compare_and_swap(&NAME##_p, (T)(x + 1), 7) == (T)(x + 1)); writes++;    \
    CHECK(__sync_bool_compare_and_swap(&NAME##_p, 7, 8)); writes++;                          \
    CHECK(!__sync_bool_compare_and_swap(&NAME##_p, 7, 9)); writes++;                         \
    CHECK_EQ(__sync_lock_test_and_set(&NAME##_p, 9), 8); writes++;                           \
    e = 9;                                                                                   \
    CHECK(__atomic_compare_exchange_n(&NAME##_p, &e, 11, 1, __ATOMIC_ACQ_REL,                \
                                      __ATOMIC_RELAXED)); writes++;                          \
    CHECK_EQ(__atomic_fetch_sub(&NAME##_p, 1, __ATOMIC_CONSUME), 11); writes++;              \
    HLE_OP(NAME##_p, writes);                                                                \
    __sync_lock_release(&NAME##_p); writes++;                                                \
    CHECK_EQ(__atomic_load_n(&NAME##_p, __ATOMIC_SEQ_CST), 0);                               \
    snap();                                                                                  \
    CHECK_EQ(st.win_access[0][sizeof(T)], 2);                                                \
    CHECK_EQ(st.win_access[1][sizeof(T)], writes);                                           \
  }

#ifdef __ATOMIC_HLE_ACQUIRE
/* GCC passes the HLE bits through in the memory-order argument; the runtime must mask them. */
#define HLE_OP(OBJ, W) \
  CHECK_EQ(__atomic_fetch_add(&OBJ, 1, __ATOMIC_SEQ_CST | __ATOMIC_HLE_ACQUIRE), 10); W++
#else
#define HLE_OP(OBJ, W) CHECK_EQ(__atomic_fetch_add(&OBJ, 1, __ATOMIC_SEQ_CST), 10); W++
#endif

ATOMIC_WIDTH_TEST(uint8_t, u8)
ATOMIC_WIDTH_TEST(uint16_t, u16)
ATOMIC_WIDTH_TEST(uint32_t, u32)
ATOMIC_WIDTH_TEST(uint64_t, u64)
ATOMIC_WIDTH_TEST(u128, u128)

static _Alignas(16) _Atomic u128 big128;

static void test_atomics(void) {
  test_atomic_u8();
  test_atomic_u16();
  test_atomic_u32();
  test_atomic_u64();
  test_atomic_u128();

  g_section = "128-bit values beyond 64 bits";
  rec_watch(&big128, sizeof big128);
  u128 hi = ((u128)0x0123456789abcdefull << 64) | 0xfedcba9876543210ull;
  atomic_store(&big128, hi);
  CHECK(atomic_load(&big128) == hi);
  CHECK(atomic_fetch_add(&big128, ((u128)1 << 64) - 0xfedcba9876543210ull) == hi); /* carries */
  CHECK(atomic_load(&big128) == (((u128)0x0123456789abcdf0ull << 64) | 0x0));
  u128 e = 5;
  CHECK(!atomic_compare_exchange_strong(&big128, &e, 6));
  CHECK(e == ((u128)0x0123456789abcdf0ull << 64));
  snap();
  CHECK_EQ(st.win_access[1][16], 3);
  CHECK_EQ(st.win_access[0][16], 2);

  g_section = "fences";
  atomic_thread_fence(memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  atomic_thread_fence(memory_order_release);
  atomic_thread_fence(memory_order_acq_rel);
  atomic_thread_fence(memory_order_seq_cst);
  atomic_signal_fence(memory_order_seq_cst);
  atomic_signal_fence(memory_order_acquire);
  __sync_synchronize();
  atomic_flag f = ATOMIC_FLAG_INIT;
  CHECK(!atomic_flag_test_and_set(&f));
  CHECK(atomic_flag_test_and_set(&f));
  atomic_flag_clear(&f);
  CHECK(!atomic_flag_test_and_set(&f));
}

/* ------------------------------------------------------------------------------------------------ */
enum { NITER = 100000 };
static struct {
  _Atomic uint64_t c64;
  uint32_t cas32;
  _Atomic uint16_t c16;
  _Alignas(16) u128 c128;
} shared;

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < NITER; i++) {
    atomic_fetch_add_explicit(&shared.c64, 1, memory_order_relaxed);
    uint32_t old = __atomic_load_n(&shared.cas32, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&shared.cas32, &old, old + 1, 1, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
    }
    atomic_fetch_add(&shared.c16, 1);
    __atomic_fetch_add(&shared.c128, 1, __ATOMIC_SEQ_CST);
  }
  return NULL;
}

static void test_threads(void) {
  g_section = "two threads";
  shared.c128 = ((u128)1 << 64) - NITER; /* crosses the 64-bit boundary half-way */
  rec_watch(&shared, sizeof shared);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  snap();
  CHECK_EQ(atomic_load(&shared.c64), 2 * NITER);
  CHECK_EQ(__atomic_load_n(&shared.cas32, __ATOMIC_SEQ_CST), 2 * NITER);
  CHECK_EQ(atomic_load(&shared.c16), (2 * NITER) & 0xffff);
  CHECK(__atomic_load_n(&shared.c128, __ATOMIC_SEQ_CST) == ((u128)1 << 64) + NITER);
  /* Every atomic reported, none lost under concurrency. */
  CHECK_EQ(st.win_access[1][8], 2 * NITER);
  CHECK_EQ(st.win_access[1][2], 2 * NITER);
  CHECK_EQ(st.win_access[1][16], 2 * NITER);
  CHECK(st.win_access[1][4] >= 2 * NITER); /* + failed compare-exchange attempts */
  CHECK(st.win_access[0][4] >= 2 * NITER);
}

/* ------------------------------------------------------------------------------------------------ */
static volatile uint64_t sigword;
static void on_sigusr1(int sig) {
  (void)sig;
  sigword = 42;
}

static void test_signal(void) {
  g_section = "signal handler";
  signal(SIGUSR1, on_sigusr1);
  rec_watch(&sigword, sizeof sigword);
  raise(SIGUSR1);
  snap();
  CHECK_EQ(sigword, 42);
  CHECK_EQ(st.win_access[1][8], 1);
}

/* ------------------------------------------------------------------------------------------------ */
/* Entry points this compiler may not emit (the other compiler's, option-dependent and explicit-pc
 * variants), called directly. */
void __tsan_read1_pc(void* addr, void* pc);
void __tsan_write16_pc(void* addr, void* pc);
void __tsan_read_range_pc(void* addr, unsigned long size, void* pc);
void __tsan_unaligned_write16(void* addr);
void __tsan_unaligned_read2(void* addr);
void __tsan_read_write8(void* addr);
void __tsan_unaligned_read_write4(void* addr);
void __tsan_unaligned_volatile_write8(void* addr);
void __tsan_vptr_read(void** p);
void __tsan_vptr_update(void** p, void* v);
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
uint32_t __tsan_atomic32_compare_exchange_val(volatile uint32_t* a, uint32_t c, uint32_t v, int mo,
                                              int fmo);
uint64_t __tsan_atomic64_fetch_add(volatile uint64_t* a, uint64_t v, int mo);
u128 __tsan_atomic128_fetch_add(volatile u128* a, u128 v, int mo);
u128 __tsan_atomic128_load(const volatile u128* a, int mo);
u128 __tsan_atomic128_compare_exchange_val(volatile u128* a, u128 c, u128 v, int mo, int fmo);
int __tsan_atomic128_compare_exchange_weak(volatile u128* a, u128* c, u128 v, int mo, int fmo);
uint8_t __tsan_atomic8_fetch_nand(volatile uint8_t* a, uint8_t v, int mo);

static _Alignas(64) unsigned char direct[128];

static void test_direct_calls(void) {
  g_section = "direct: explicit pc / other compiler's variants";
  rec_watch(direct, sizeof direct);
  __tsan_read1_pc(direct + 1, (void*)0x1234);
  __tsan_write16_pc(direct + 16, (void*)0x5678);
  __tsan_read_range_pc(direct + 32, 7, (void*)0x9abc);
  __tsan_unaligned_write16(direct + 3);
  __tsan_unaligned_read2(direct + 5);
  __tsan_read_write8(direct + 40);
  __tsan_unaligned_read_write4(direct + 49);
  __tsan_unaligned_volatile_write8(direct + 51);
  __tsan_vptr_read((void**)(direct + 56));
  __tsan_vptr_update((void**)(direct + 64), 0);
  __tsan_ignore_thread_begin();
  __tsan_ignore_thread_end();
  snap();
  CHECK(logged(direct + 1, 1, K_R) && st.log[0].ip == 0x1234);
  CHECK(logged(direct + 16, 16, K_W) && st.log[1].ip == 0x5678);
  CHECK(logged(direct + 32, 7, K_RR) && st.log[2].ip == 0x9abc);
  CHECK(logged(direct + 3, 16, K_W));
  CHECK(logged(direct + 5, 2, K_R));
  CHECK(logged(direct + 40, 8, K_W));
  CHECK(logged(direct + 49, 4, K_W));
  CHECK(logged(direct + 51, 8, K_W));
  CHECK(logged(direct + 56, 8, K_R));
  CHECK(logged(direct + 64, 8, K_W));
  CHECK_EQ(st.log_count, 10);
  /* __tsan_func_entry/exit are exercised by the entry/exit variants in check.sh. */

  g_section = "direct: atomics, odd memory orders";
  volatile uint32_t* a32 = (volatile uint32_t*)(direct + 64);
  *a32 = 5;
  CHECK_EQ(__tsan_atomic32_compare_exchange_val(a32, 5, 6, 5, 5), 5);  /* success: old value */
  CHECK_EQ(__tsan_atomic32_compare_exchange_val(a32, 5, 7, 2, 2), 6);  /* failure: current */
  CHECK_EQ(__tsan_atomic32_compare_exchange_val(a32, 6, 7, 0, 5), 6);  /* fail > success order */
  CHECK_EQ(*a32, 7);
  volatile uint64_t* a64 = (volatile uint64_t*)(direct + 72);
  *a64 = 1;
  CHECK_EQ(__tsan_atomic64_fetch_add(a64, 2, 5 | 0x10000), 1); /* HLE acquire bit */
  CHECK_EQ(__tsan_atomic64_fetch_add(a64, 2, 77), 3);          /* invalid: treated as seq_cst */
  CHECK_EQ(*a64, 5);
  volatile uint8_t* a8 = direct + 80;
  *a8 = 0xf0;
  CHECK_EQ(__tsan_atomic8_fetch_nand(a8, 0x3c, 0), 0xf0);
  CHECK_EQ(*a8, (uint8_t) ~(0xf0 & 0x3c));

  g_section = "direct: misaligned 16-byte atomics (locked fallback)";
  volatile u128* m = (volatile u128*)(direct + 97); /* not 16-byte aligned */
  for (int i = 0; i < 16; i++) direct[97 + i] = 0;
  CHECK(__tsan_atomic128_fetch_add(m, 5, 5) == 0);
  CHECK(__tsan_atomic128_fetch_add(m, (u128)1 << 70, 0) == 5);
  CHECK(__tsan_atomic128_load(m, 2) == (((u128)1 << 70) | 5));
  CHECK(__tsan_atomic128_compare_exchange_val(m, 1, 2, 5, 5) == (((u128)1 << 70) | 5));
  u128 c = ((u128)1 << 70) | 5;
  CHECK(__tsan_atomic128_compare_exchange_weak(m, &c, 9, 4, 2));
  CHECK(__tsan_atomic128_load(m, 5) == 9);

  g_section = "direct: aligned 16-byte compare-exchange";
  volatile u128* al = (volatile u128*)(direct + 16);
  c = 1;
  *al = 3;
  CHECK(!__tsan_atomic128_compare_exchange_weak(al, &c, 4, 5, 5));
  CHECK(c == 3);
  CHECK(__tsan_atomic128_compare_exchange_weak(al, &c, 4, 5, 5));
  CHECK(__tsan_atomic128_load(al, 0) == 4);
}

/* ------------------------------------------------------------------------------------------------ */
int main(void) {
  g_section = "init";
  snap();
  CHECK_EQ(st.inits, 1); /* __tsan_init ran (from the module constructor) before main, once */

  const char* nowrap = getenv("WHYMISS_ABI_NO_WRAP");
  test_plain_accesses();
  test_sizes();
  const int wrapped = !(nowrap && *nowrap == '1');
  test_layouts(wrapped);
  test_memfuncs(wrapped);
  test_atomics();
  test_threads();
  test_signal();
  test_direct_calls();

  /* The guard the runtime's pthread hooks take (access_sink.h's enter_sink): never let in from
   * inside the sink (a signal handler's mutex call in the middle of an access), always outside. */
  g_section = "enter_sink";
  snap();
  CHECK(st.enter_tries_inside > 0);
  CHECK_EQ(st.entered_inside, 0);
  CHECK_EQ(rec_enter_outside(), 1);

  if (failures) {
    fprintf(stderr, "FAIL: %d check(s) failed\n", failures);
    return 1;
  }
  printf("PASS\n");
  return 0;
}
