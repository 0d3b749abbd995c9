// C++ side of the ABI proof: compiled with -fsanitize=thread by g++ AND clang++ (see check.sh),
// linked against whymiss_tsan_abi + the recording sink instead of libtsan, run, and checked from the
// sink's counters. Prints "PASS" and exits 0 on success.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "recording_sink.h"

#if defined(__clang__)
#define NOIPA __attribute__((noinline, used))
#else
#define NOIPA __attribute__((noipa, used))
#endif

using u128 = unsigned __int128;

// External linkage and two dynamic types, so the optimiser cannot devirtualise call_virtual().
struct Base {
  explicit Base(int v) : value(v) {}
  virtual ~Base() {}
  virtual int get() const { return value; }
  int value;
};
struct Derived : Base {
  explicit Derived(int v) : Base(v) {}
  int get() const override { return value * 2; }
};
NOIPA int call_virtual(const Base* b) { return b->get(); }

namespace {

int failures;
const char* g_section = "";

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "%s:%d [%s]: CHECK failed: %s\n", __FILE__, __LINE__, g_section,    \
                   #cond);                                                                     \
      failures++;                                                                              \
    }                                                                                          \
  } while (0)

#define CHECK_EQ(a, b)                                                                         \
  do {                                                                                         \
    unsigned long long va_ = static_cast<unsigned long long>(a);                               \
    unsigned long long vb_ = static_cast<unsigned long long>(b);                               \
    if (va_ != vb_) {                                                                          \
      std::fprintf(stderr, "%s:%d [%s]: CHECK_EQ failed: %s == %s (%llu vs %llu)\n", __FILE__, \
                   __LINE__, g_section, #a, #b, va_, vb_);                                     \
      failures++;                                                                              \
    }                                                                                          \
  } while (0)

rec_stats st;
void snap() { rec_snapshot(&st); }

bool logged(const volatile void* addr, uint64_t size, unsigned kind_mask) {
  uint64_t n = st.log_count < uint64_t{REC_LOG_MAX} ? st.log_count : uint64_t{REC_LOG_MAX};
  for (uint64_t i = 0; i < n; i++)
    if (st.log[i].addr == reinterpret_cast<uintptr_t>(addr) && st.log[i].size == size &&
        ((kind_mask >> st.log[i].kind) & 1u))
      return true;
  return false;
}
constexpr unsigned K_R = 1u << REC_READ, K_W = 1u << REC_WRITE;

// ------------------------------------------------------------------------------------------------
// std::atomic<T> for every lock-free integer width: every operation kind, exact access counts.
template <class T>
NOIPA void atomic_width_test(std::atomic<T>& a, const char* name) {
  g_section = name;
  rec_watch(&a, sizeof a);
  unsigned reads = 0, writes = 0;
  a.store(10, std::memory_order_relaxed); writes++;
  for (auto o : {std::memory_order_relaxed, std::memory_order_consume, std::memory_order_acquire,
                 std::memory_order_seq_cst}) {
    CHECK_EQ(a.load(o), 10);
    reads++;
  }
  a.store(11, std::memory_order_release); writes++;
  a = 12;
  writes++;
  CHECK_EQ(a.exchange(20, std::memory_order_acq_rel), 12); writes++;
  CHECK_EQ(a.fetch_add(5), 20); writes++;
  CHECK_EQ(a.fetch_sub(3, std::memory_order_release), 25); writes++;
  CHECK_EQ(a.fetch_and(0x16, std::memory_order_acquire), 22); writes++;
  CHECK_EQ(a.fetch_or(0x21, std::memory_order_relaxed), 0x16); writes++;
  CHECK_EQ(a.fetch_xor(0x0f), 0x37); writes++;
  CHECK_EQ(++a, 0x39); writes++;
  CHECK_EQ(a--, 0x39); writes++;
  CHECK_EQ(a += 2, 0x3a); writes++;
  T e = 0x3a;
  CHECK(a.compare_exchange_strong(e, 70)); writes++;
  e = 1;
  CHECK(!a.compare_exchange_strong(e, 80, std::memory_order_acq_rel, std::memory_order_acquire));
  writes++;
  CHECK_EQ(e, 70);
  CHECK(!a.compare_exchange_weak(e = 2, 80, std::memory_order_release)); writes++;
  e = 70;
  while (!a.compare_exchange_weak(e, 90, std::memory_order_seq_cst, std::memory_order_relaxed))
    writes++;
  writes++;
  CHECK_EQ(a.load(), 90); reads++;
  snap();
  CHECK_EQ(st.win_access[0][sizeof(T)], reads);
  CHECK_EQ(st.win_access[1][sizeof(T)], writes);
  CHECK_EQ(st.win_access_bytes[0] + st.win_access_bytes[1], (reads + writes) * sizeof(T));
}

std::atomic<int8_t> a8;
std::atomic<uint16_t> a16;
std::atomic<int32_t> a32;
std::atomic<uint64_t> a64;
std::atomic<u128> a128;  // libstdc++: load/store/exchange/compare_exchange only
std::atomic<double> ad;
std::atomic<int*> ap;

void test_atomics() {
  atomic_width_test(a8, "std::atomic<int8_t>");
  atomic_width_test(a16, "std::atomic<uint16_t>");
  atomic_width_test(a32, "std::atomic<int32_t>");
  atomic_width_test(a64, "std::atomic<uint64_t>");

  g_section = "std::atomic<unsigned __int128>";
  rec_watch(&a128, sizeof a128);
  const u128 big = (static_cast<u128>(0x1122334455667788ull) << 64) | 0x99aabbccddeeff00ull;
  a128.store(big);
  CHECK(a128.load(std::memory_order_acquire) == big);
  CHECK(a128.exchange(big + 1) == big);
  u128 e = big;
  CHECK(!a128.compare_exchange_strong(e, 5));
  CHECK(e == big + 1);
  CHECK(a128.compare_exchange_weak(e, 5, std::memory_order_acq_rel, std::memory_order_acquire));
  CHECK(a128.load() == 5);
  snap();
  CHECK_EQ(st.win_access[0][16], 2);
  CHECK_EQ(st.win_access[1][16], 4);

  g_section = "std::atomic<double>, std::atomic<T*>";
  ad.store(1.5);
  CHECK(ad.exchange(2.5) == 1.5);
  CHECK(ad.load() == 2.5);
  int arr[4] = {0, 1, 2, 3};
  ap.store(arr);
  CHECK(ap.fetch_add(2) == arr);
  CHECK(*ap.load() == 2);

  g_section = "fences, atomic_flag";
  for (auto o : {std::memory_order_relaxed, std::memory_order_consume, std::memory_order_acquire,
                 std::memory_order_release, std::memory_order_acq_rel,
                 std::memory_order_seq_cst}) {
    std::atomic_thread_fence(o);
    std::atomic_signal_fence(o);
  }
  std::atomic_flag f;
  f.clear();
  CHECK(!f.test_and_set());
  CHECK(f.test_and_set());
  CHECK(f.test());
  f.clear(std::memory_order_release);
  CHECK(!f.test());
}

// ------------------------------------------------------------------------------------------------
constexpr int kIters = 100000;
struct Shared {
  std::atomic<int64_t> c64{0};
  std::atomic<int32_t> cas32{0};
  std::atomic<uint8_t> c8{0};
  std::atomic<u128> c128{0};
};
Shared shared;

void test_threads() {
  g_section = "two std::threads";
  shared.c128.store((static_cast<u128>(1) << 64) - kIters);
  rec_watch(&shared, sizeof shared);
  auto work = [] {
    for (int i = 0; i < kIters; i++) {
      shared.c64.fetch_add(1, std::memory_order_relaxed);
      int32_t old = shared.cas32.load(std::memory_order_relaxed);
      while (!shared.cas32.compare_exchange_weak(old, old + 1, std::memory_order_acq_rel,
                                                 std::memory_order_relaxed)) {
      }
      shared.c8.fetch_add(1);
      u128 o = shared.c128.load(std::memory_order_relaxed);
      while (!shared.c128.compare_exchange_strong(o, o + 1)) {
      }
    }
  };
  std::thread t1(work), t2(work);
  t1.join();
  t2.join();
  snap();
  CHECK_EQ(shared.c64.load(), 2 * kIters);
  CHECK_EQ(shared.cas32.load(), 2 * kIters);
  CHECK_EQ(shared.c8.load(), (2 * kIters) & 0xff);
  CHECK(shared.c128.load() == (static_cast<u128>(1) << 64) + kIters);
  CHECK_EQ(st.win_access[1][8], 2 * kIters);
  CHECK_EQ(st.win_access[1][1], 2 * kIters);
  CHECK(st.win_access[1][4] >= 2 * kIters);
  CHECK(st.win_access[1][16] >= 2 * kIters);
  CHECK(st.win_access[0][16] >= 2 * kIters);
}

// ------------------------------------------------------------------------------------------------
alignas(64) unsigned char objbuf[256];

void test_vptr() {
  g_section = "vptr: construction";
  rec_watch(objbuf, sizeof objbuf);
  Base* b = new (objbuf) Derived(21);
  snap();
  // The vptr store(s) in the constructors: __tsan_vptr_update (both compilers).
  CHECK(logged(objbuf, sizeof(void*), K_W));

  g_section = "vptr: virtual call";
  rec_watch(objbuf, sizeof objbuf);
  CHECK_EQ(call_virtual(b), 42);
  snap();
  Base plain(5);
  CHECK_EQ(call_virtual(&plain), 5);
  // The vptr load: __tsan_vptr_read (Clang) or __tsan_read8 (GCC).
  CHECK(logged(objbuf, sizeof(void*), K_R));
  b->~Base();
}

// ------------------------------------------------------------------------------------------------
struct Bits {
  unsigned a : 3, b : 5, c : 13;
};
Bits bits;
NOIPA void bits_update(Bits* x) {
  x->b = 17;
  x->c = 4000;
}

NOIPA int thrower(int x) {
  if (x > 0) throw std::runtime_error("boom");
  return x;
}

void test_library_code() {
  g_section = "std::vector copy (memmove/memcpy from libstdc++ headers)";
  // Run-time size: with a constant size GCC expands the copy inline (rep movs) and it is invisible.
  static volatile size_t vn = 1000;
  std::vector<int> v(vn);
  for (size_t i = 0; i < v.size(); i++) v[i] = static_cast<int>(i);
  rec_watch(v.data(), v.size() * sizeof(int));
  std::vector<int> w(v);
  snap();
  CHECK(st.win_access_bytes[0] + st.win_range_bytes[0] >= 1000 * sizeof(int));
  CHECK(w == v);

  g_section = "std::string";
  std::string s = "hello";
  for (int i = 0; i < 100; i++) s += " world";
  CHECK_EQ(s.size(), 5 + 600);

  g_section = "bitfields";
  rec_watch(&bits, sizeof bits);
  bits_update(&bits);
  snap();
  CHECK(st.win_access_bytes[1] + st.win_range_bytes[1] >= 1);
  CHECK_EQ(bits.b, 17);
  CHECK_EQ(bits.c, 4000);

  g_section = "exceptions";
  int caught = 0;
  try {
    thrower(1);
  } catch (const std::runtime_error& e) {
    caught = std::strcmp(e.what(), "boom") == 0;
  }
  CHECK(caught);
}

}  // namespace

int main() {
  g_section = "init";
  snap();
  CHECK_EQ(st.inits, 1);
  test_atomics();
  test_threads();
  test_vptr();
  test_library_code();
  if (failures) {
    std::fprintf(stderr, "FAIL: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}
