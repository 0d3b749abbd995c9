// Local benchmark of the heap subsystem (not a test): cost of a malloc+free pair with the hooks
// (WHYMISS_BENCH_HOOKS, linked with the test runtime, recording on) or plain glibc, and the cost
// of with_object() lookups. Prints one line per measurement.
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#ifdef WHYMISS_BENCH_HOOKS
#include "runtime/common/heap.h"
#endif

namespace {

template <typename T>
T* opaque(T* p) {
  __asm__ volatile("" : "+r"(p) : : "memory");
  return p;
}

double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const size_t kSizes[8] = {16, 24, 40, 64, 100, 200, 500, 1000};

__attribute__((noinline)) double pairs(long n) {
  const double t0 = now_ns();
  for (long i = 0; i < n; ++i) free(opaque(malloc(kSizes[i & 7])));
  return (now_ns() - t0) / n;
}

// Allocate a batch, then free it: objects share pages, lists grow and shrink.
__attribute__((noinline)) double batches(long rounds, int batch) {
  std::vector<void*> v(batch);
  const double t0 = now_ns();
  for (long r = 0; r < rounds; ++r) {
    for (int i = 0; i < batch; ++i) v[i] = opaque(malloc(kSizes[(i + r) & 7]));
    for (int i = 0; i < batch; ++i) free(v[i]);
  }
  return (now_ns() - t0) / (rounds * batch);
}

double threaded_pairs(int threads, long n) {
  std::vector<std::thread> ts;
  std::vector<double> per(threads);
  for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { per[t] = pairs(n); });
  for (auto& t : ts) t.join();
  double sum = 0;
  for (double d : per) sum += d;
  return sum / threads;
}

#ifdef WHYMISS_BENCH_HOOKS
void touch(whymiss::rt::HeapObject& o, void*) {
  o.misses[1] += 1;
}

double lookups(const std::vector<uintptr_t>& addrs, long n, long* found) {
  long f = 0;
  const double t0 = now_ns();
  for (long i = 0; i < n; ++i) {
    f += whymiss::rt::with_object(addrs[i & (addrs.size() - 1)], touch, nullptr);
  }
  const double dt = (now_ns() - t0) / n;
  *found = f;
  return dt;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  pairs(1000000);                       // warm up (and, with hooks, intern the sites)
  if (argc > 1 && argv[1][0] == 'p') {  // "pairs": only that, for profiling
    printf("pairs: %.1f ns\n", pairs(50000000));
    return 0;
  }
  if (argc > 1 && argv[1][0] == 'b') {  // "batches": only that, for profiling
    printf("batches: %.1f ns\n", batches(50000, 1000));
    return 0;
  }
#ifdef WHYMISS_BENCH_HOOKS
  const char* what = "hooks";
#else
  const char* what = "plain";
#endif
  printf("%s: malloc+free pair, 1 thread:        %6.1f ns\n", what, pairs(20000000));
  printf("%s: malloc x1000 then free x1000:      %6.1f ns per pair\n", what, batches(20000, 1000));
  printf("%s: malloc+free pair, 2 threads:       %6.1f ns\n", what, threaded_pairs(2, 5000000));
  printf("%s: malloc+free pair, 4 threads:       %6.1f ns\n", what, threaded_pairs(4, 5000000));
#ifdef WHYMISS_BENCH_HOOKS
  // 100k live objects of mixed sizes; look up random addresses inside them.
  std::mt19937_64 rng(1);
  std::vector<void*> live;
  std::vector<uintptr_t> addrs(1 << 20);
  for (int i = 0; i < 100000; ++i) {
    const size_t size = rng() % 10 == 0 ? 1 + rng() % 100000 : 1 + rng() % 256;
    live.push_back(opaque(malloc(size)));
  }
  for (auto& a : addrs) {
    const size_t k = rng() % live.size();
    a = reinterpret_cast<uintptr_t>(live[k]) + rng() % 16;
  }
  long found = 0;
  lookups(addrs, 1 << 20, &found);
  const double random_ns = lookups(addrs, 20000000, &found);
  printf("hooks: with_object, random live objects: %6.1f ns (%ld/%d found)\n", random_ns, found,
         20000000);
  // Sequential addresses through one object (the common exact-mode pattern: a loop over an array).
  auto* arr = static_cast<char*>(opaque(malloc(1 << 20)));
  for (size_t i = 0; i < addrs.size(); ++i)
    addrs[i] = reinterpret_cast<uintptr_t>(arr) + (i & ((1 << 20) - 1)) * 64 % (1 << 20);
  const double seq_ns = lookups(addrs, 20000000, &found);
  printf("hooks: with_object, one 1 MiB array:     %6.1f ns (%ld found)\n", seq_ns, found);
  // A few small objects (page level, one lock per lookup), all in cache.
  for (size_t i = 0; i < addrs.size(); ++i) {
    addrs[i] = reinterpret_cast<uintptr_t>(live[i & 15]) + (i & 7);
  }
  const double small_ns = lookups(addrs, 20000000, &found);
  printf("hooks: with_object, 16 small hot objects: %5.1f ns (%ld found)\n", small_ns, found);
  // Not heap: stack / global addresses.
  static char global[4096];
  for (size_t i = 0; i < addrs.size(); ++i)
    addrs[i] = reinterpret_cast<uintptr_t>(&global[i & 4095]);
  const double miss_ns = lookups(addrs, 20000000, &found);
  printf("hooks: with_object, global (no object):  %6.1f ns (%ld found)\n", miss_ns, found);
  // 4 threads looking up at once (each its own objects region of the shared array set).
  std::vector<std::thread> ts;
  std::vector<double> per(4);
  for (auto& a : addrs) a = reinterpret_cast<uintptr_t>(live[rng() % live.size()]);
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      long f = 0;
      per[t] = lookups(addrs, 5000000, &f);
    });
  }
  for (auto& t : ts) t.join();
  printf("hooks: with_object, 4 threads random:    %6.1f ns\n",
         (per[0] + per[1] + per[2] + per[3]) / 4);
  for (void* p : live) free(p);
  free(arr);
  // Private heap alone.
  const double t0 = now_ns();
  for (long i = 0; i < 20000000; ++i) {
    whymiss::rt::private_free(opaque(whymiss::rt::private_alloc(kSizes[i & 7])));
  }
  printf("hooks: private_alloc+private_free pair:  %6.1f ns\n", (now_ns() - t0) / 20000000);
  printf("hooks: dropped objects %llu, sites %zu\n",
         static_cast<unsigned long long>(whymiss::rt::dropped_objects()),
         whymiss::rt::site_count());
#endif
  return 0;
}
