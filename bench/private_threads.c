// Private work per thread, for bench/thread_scaling.py: each of N threads sweeps an array of its
// own (64 KiB by default, so larger than a 32-48 KiB L1: a line in eight accesses misses it),
// reading and writing every 8-byte word, the same number of passes per thread whatever N. Nothing
// is shared: the arrays are separate page-aligned allocations and the threads meet only at
// pthread_join. A perfectly scaling profiler takes the same wall time for every N up to the
// number of cores.
//
// usage: private_threads THREADS [PASSES] [KIB] [WAVE]
// WAVE: the threads are created WAVE at a time, each wave joined before the next starts (default:
// all at once); tests/runtime_exact/check_interleave_parallel.py runs 100 threads in waves of 10.
#define _POSIX_C_SOURCE 200112L  // posix_memalign, barriers, also under -std=c11 (the tests build it so)
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long passes = 200;
static size_t words = 64 * 1024 / 8;
static pthread_barrier_t start;  // a wave's threads and the main thread: all live at once

static void* work(void* arg) {
  uint64_t* a = arg;
  uint64_t sum = a[0];  // (an access before the barrier: exact mode gives the thread its core here)
  pthread_barrier_wait(&start);
  for (long p = 0; p < passes; ++p)
    for (size_t i = 0; i < words; ++i) {
      sum += a[i];
      a[i] = sum;
    }
  return (void*)(uintptr_t)sum;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s THREADS [PASSES] [KIB] [WAVE]\n", argv[0]);
    return 2;
  }
  const int n = atoi(argv[1]);
  if (argc > 2) passes = atol(argv[2]);
  if (argc > 3) words = (size_t)atol(argv[3]) * 1024 / 8;
  const int wave = argc > 4 ? atoi(argv[4]) : n;
  if (n < 1 || n > 1024 || passes < 1 || words < 1 || wave < 1) {
    fprintf(stderr, "%s: THREADS must be 1-1024, PASSES, KIB and WAVE positive\n", argv[0]);
    return 2;
  }
  pthread_t* t = calloc((size_t)n, sizeof *t);
  uint64_t** arrays = calloc((size_t)n, sizeof *arrays);
  for (int i = 0; i < n; ++i) {
    if (posix_memalign((void**)&arrays[i], 4096, words * 8) != 0) return 1;
    for (size_t w = 0; w < words; ++w) arrays[i][w] = w + (uint64_t)i;
  }
  uint64_t total = 0;
  for (int first = 0; first < n; first += wave) {
    const int end = first + wave < n ? first + wave : n;
    pthread_barrier_init(&start, NULL, (unsigned)(end - first + 1));
    for (int i = first; i < end; ++i)
      if (pthread_create(&t[i], NULL, work, arrays[i]) != 0) return 1;
    pthread_barrier_wait(&start);
    for (int i = first; i < end; ++i) {
      void* r;
      pthread_join(t[i], &r);
      total += (uint64_t)(uintptr_t)r;
    }
    pthread_barrier_destroy(&start);
  }
  printf("%llu\n", (unsigned long long)total);
  return 0;
}
