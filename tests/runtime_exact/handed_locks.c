/* Threads that share lines only under mutexes (parallel mode's "threads take turns" rule,
 * docs/parallel-sim.md): handed_locks MODE THREADS ITERS.
 *   handed: every thread increments a counter under one mutex, beside it on its line, and
 *           writes a value on a line of its own there; after the unlock it reads the value the
 *           next thread wrote: every sharing miss is inside a critical section of a lock another
 *           thread released last, or a few accesses after it;
 *   long:   the threads take turns on a condition variable under that mutex, and each critical
 *           section first sweeps the private array 5 times (over 8 Ki accesses), then increments
 *           a counter on a line of its own: that miss comes long after the lock was taken;
 *   own:    every thread increments its own counter under its own mutex, the counters packed on
 *           one line: false sharing that no lock orders;
 *   join:   ITERS rounds of: the main thread clears 8 lines of results, starts one worker that
 *           fills them in, joins it and sums them (THREADS is ignored): every sharing miss comes
 *           right after a thread's start or a join.
 * Between increments each thread sweeps a private 4 KiB array (so the sharing rate stays under
 * the sustained-rate rule's). Threads start together at a barrier. Prints the counters' sum. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kMaxThreads = 8, kPrivate = 1024 };

static struct {
  pthread_mutex_t lock;
  long counter;
} __attribute__((aligned(64))) shared = {PTHREAD_MUTEX_INITIALIZER, 0};
static struct {
  volatile long value;
} __attribute__((aligned(64))) published[kMaxThreads], long_counter;  /* a line each */
static pthread_cond_t turn_changed = PTHREAD_COND_INITIALIZER;
static long turn;  /* (long: whose turn it is; under shared.lock) */
static int nthreads;

static pthread_mutex_t own_locks[kMaxThreads];
static volatile long packed[kMaxThreads] __attribute__((aligned(64)));  /* one line */
static pthread_barrier_t start;
static long results[64] __attribute__((aligned(64)));  /* (join: 8 lines) */

static void* fill(void* arg) {
  (void)arg;
  for (int i = 0; i < 64; ++i) results[i] = i;
  return NULL;
}

static int join_rounds(long rounds) {
  long sum = 0;
  for (long r = 0; r < rounds; ++r) {
    for (int i = 0; i < 64; ++i) results[i] = 0;
    pthread_t t;
    if (pthread_create(&t, NULL, fill, NULL) != 0) return 1;
    pthread_join(t, NULL);
    for (int i = 0; i < 64; ++i) sum += results[i];
  }
  printf("%ld\n", sum);
  return sum == rounds * (63 * 64 / 2) ? 0 : 1;
}
static int handed, long_sections;
static long iters;

static void* work(void* arg) {
  const long me = (long)arg;
  int* mine = calloc(kPrivate, sizeof *mine);
  if (!mine) return NULL;
  pthread_barrier_wait(&start);
  for (long i = 0; i < iters; ++i) {
    if (handed) {
      pthread_mutex_lock(&shared.lock);
      if (long_sections) {
        while (turn != me) pthread_cond_wait(&turn_changed, &shared.lock);
        for (int k = 0; k < 5; ++k)
          for (int j = 0; j < kPrivate; ++j) mine[j] += j;
        long_counter.value++;
        turn = (turn + 1) % nthreads;
        pthread_cond_broadcast(&turn_changed);
        pthread_mutex_unlock(&shared.lock);
        continue;
      }
      shared.counter++;
      published[me].value = i;
      pthread_mutex_unlock(&shared.lock);
      mine[0] += (int)published[(me + 1) % nthreads].value;
    } else {
      pthread_mutex_lock(&own_locks[me]);
      packed[me]++;
      pthread_mutex_unlock(&own_locks[me]);
    }
    for (int j = 0; j < kPrivate; ++j) mine[j] += j;
  }
  free(mine);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4 || (strcmp(argv[1], "handed") != 0 && strcmp(argv[1], "long") != 0 &&
                    strcmp(argv[1], "own") != 0 && strcmp(argv[1], "join") != 0)) {
    fprintf(stderr, "usage: handed_locks handed|long|own|join THREADS ITERS\n");
    return 2;
  }
  if (strcmp(argv[1], "join") == 0) return join_rounds(atol(argv[3]));
  handed = strcmp(argv[1], "own") != 0;
  long_sections = strcmp(argv[1], "long") == 0;
  const int n = nthreads = atoi(argv[2]);
  iters = atol(argv[3]);
  if (n < 2 || n > kMaxThreads || iters < 1) {
    fprintf(stderr, "handed_locks: THREADS is 2 to %d, ITERS at least 1\n", kMaxThreads);
    return 2;
  }
  for (int i = 0; i < n; ++i) pthread_mutex_init(&own_locks[i], NULL);
  pthread_barrier_init(&start, NULL, (unsigned)n);
  pthread_t t[kMaxThreads];
  for (long i = 0; i < n; ++i) pthread_create(&t[i], NULL, work, (void*)i);
  for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
  long sum = shared.counter + long_counter.value;
  for (int i = 0; i < n; ++i) sum += packed[i];
  printf("%ld\n", sum);
  return sum == n * iters ? 0 : 1;
}
