/* A thread pool with per-worker counters (issue #21: does parallel mode's turns rule, which leaves
 * out sharing misses a mutex hand-over orders, still move programs that race?).
 *   pool_counters WORKERS JOBS JOBWORK PLACE PAD [EVERY]
 * The main thread queues JOBS jobs (a 64-entry ring under one mutex and two condition variables);
 * WORKERS workers (at most 8) dequeue them and each does JOBWORK iterations over a private 32 KiB
 * array. A worker increments its own counter: PLACE 0 right after the dequeue's unlock, 1 at the
 * job's end, 2 every EVERY+1 iterations inside the job (EVERY a power of two less one, default
 * 15). PAD 0 packs the counters on one line (false sharing that no lock orders), 1 gives each
 * its own line. Prints the counters' sum. Run it as bench/README.md, "Parallel against strict",
 * says: under `whymiss run --mode exact --interleave strict` and `--interleave parallel`. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { kQueue = 64, kMaxWorkers = 8 };
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t nonempty = PTHREAD_COND_INITIALIZER, nonfull = PTHREAD_COND_INITIALIZER;
static long queue[kQueue];
static int head, tail, count, done;
static long jobwork, every = 15;
static int place, pad;
static volatile long counters[kMaxWorkers * 8] __attribute__((aligned(64)));

static void bump(long me) { counters[pad ? me * 8 : me]++; }

static void* worker(void* arg) {
  const long me = (long)arg;
  long* mine = calloc(4096, sizeof *mine);
  long acc = 0;
  if (!mine) return NULL;
  for (;;) {
    pthread_mutex_lock(&lock);
    while (count == 0 && !done) pthread_cond_wait(&nonempty, &lock);
    if (count == 0) {
      pthread_mutex_unlock(&lock);
      break;
    }
    const long job = queue[head];
    head = (head + 1) % kQueue;
    count--;
    pthread_cond_signal(&nonfull);
    pthread_mutex_unlock(&lock);
    if (place == 0) bump(me);
    for (long i = 0; i < jobwork; ++i) {
      acc += mine[(job + i) & 4095]++;
      if (place == 2 && (i & every) == 0) bump(me);
    }
    if (place == 1) bump(me);
  }
  free(mine);
  return (void*)acc;
}

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    fprintf(stderr, "usage: pool_counters WORKERS JOBS JOBWORK PLACE PAD [EVERY]\n");
    return 2;
  }
  const int n = atoi(argv[1]);
  const long jobs = atol(argv[2]);
  jobwork = atol(argv[3]);
  place = atoi(argv[4]);
  pad = atoi(argv[5]);
  if (argc == 7) every = atol(argv[6]);
  if (n < 1 || n > kMaxWorkers || jobs < 0 || jobwork < 0 || place < 0 || place > 2 ||
      every < 0 || (every & (every + 1)) != 0) {
    fprintf(stderr, "pool_counters: WORKERS 1-%d, PLACE 0-2, EVERY a power of two less one\n",
            kMaxWorkers);
    return 2;
  }
  pthread_t t[kMaxWorkers];
  for (long i = 0; i < n; ++i) pthread_create(&t[i], NULL, worker, (void*)i);
  for (long j = 0; j < jobs; ++j) {
    pthread_mutex_lock(&lock);
    while (count == kQueue) pthread_cond_wait(&nonfull, &lock);
    queue[tail] = j * 7;
    tail = (tail + 1) % kQueue;
    count++;
    pthread_cond_signal(&nonempty);
    pthread_mutex_unlock(&lock);
  }
  pthread_mutex_lock(&lock);
  done = 1;
  pthread_cond_broadcast(&nonempty);
  pthread_mutex_unlock(&lock);
  for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
  long sum = 0;
  for (int i = 0; i < kMaxWorkers * 8; ++i) sum += counters[i];
  printf("%ld\n", sum);
  return 0;
}
