// Symbol-coverage probe (compiled by check.sh, never linked or run): C++ constructs that make g++ or
// clang++ emit distinct __tsan_* entry points. See probe_c.c.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

struct B {
  virtual ~B() {}
  virtual int f() { return 1; }
};
struct D : B {
  int f() override { return 2; }
};
int call_virtual(B* b) { return b->f(); }
B* make() { return new D; }
void destroy(B* b) { delete b; }

template <class T>
T all_ops(std::atomic<T>& a, T v) {
  T r{};
  T e = v;
  for (auto o : {std::memory_order_relaxed, std::memory_order_consume, std::memory_order_acquire,
                 std::memory_order_seq_cst})
    r += a.load(o);
  for (auto o : {std::memory_order_relaxed, std::memory_order_release, std::memory_order_seq_cst})
    a.store(v, o);
  r += a.exchange(v, std::memory_order_acq_rel);
  r += a.fetch_add(v);
  r += a.fetch_sub(v, std::memory_order_release);
  r += a.fetch_and(v);
  r += a.fetch_or(v);
  r += a.fetch_xor(v);
  r += a.compare_exchange_strong(e, v);
  r += a.compare_exchange_weak(e, v, std::memory_order_acq_rel, std::memory_order_relaxed);
  r += a.compare_exchange_strong(e, v, std::memory_order_release);
  ++a;
  a--;
  a += v;
  a &= v;
  a |= v;
  a ^= v;
  return r;
}
template int8_t all_ops(std::atomic<int8_t>&, int8_t);
template int16_t all_ops(std::atomic<int16_t>&, int16_t);
template int32_t all_ops(std::atomic<int32_t>&, int32_t);
template int64_t all_ops(std::atomic<int64_t>&, int64_t);

std::atomic<unsigned __int128> a128;
unsigned __int128 ops128(unsigned __int128 v) {
  unsigned __int128 e = a128.load();
  a128.store(v);
  a128.exchange(v);
  a128.compare_exchange_strong(e, v);
  a128.compare_exchange_weak(e, v);
  return e;
}
unsigned __int128 x128;
unsigned __int128 builtin128(unsigned __int128 v) {
  unsigned __int128 r = 0, e = v;
  r += __atomic_fetch_add(&x128, v, __ATOMIC_SEQ_CST);
  r += __atomic_fetch_nand(&x128, v, __ATOMIC_SEQ_CST);
  r += __atomic_compare_exchange_n(&x128, &e, v, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
  return r;
}

struct S16 {
  uint64_t a, b;
};
bool atomic_struct16(std::atomic<S16>& a) {
  S16 e = a.load();
  S16 n{1, 2};
  a.store(n);
  return a.compare_exchange_strong(e, n);
}
std::atomic<double> ad;
double atomic_double() {
  ad.store(1.0);
  return ad.load() + ad.exchange(2.0);
}
std::atomic<void*> ap;
void* atomic_pointer(void* x) {
  std::atomic<int*> q{static_cast<int*>(x)};
  q.fetch_add(1);
  ap.store(x);
  return ap.load();
}
void fences() {
  for (auto o : {std::memory_order_acquire, std::memory_order_release, std::memory_order_acq_rel,
                 std::memory_order_seq_cst}) {
    std::atomic_thread_fence(o);
    std::atomic_signal_fence(o);
  }
}
bool flag(std::atomic_flag& f) {
  bool r = f.test_and_set();
  f.clear();
  return r;
}
size_t library(std::string s) {
  std::vector<int> v(10);
  v.push_back(3);
  std::vector<int> w(v);
  return s.size() + w[3];
}
void unaligned(char* p) {
  uint64_t x;
  std::memcpy(&x, p + 1, 8);
  x++;
  std::memcpy(p + 3, &x, 8);
}
