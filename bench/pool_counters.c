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
/* The settings, on a line of their own: beside the queue's indices, the workers' reads of them
 * took sharing misses of their own. Written before the workers start. */
static struct {
  long jobwork, every;
  int place, pad;
} __attribute__((aligned(64))) cfg = {0, 15, 0, 0};
static volatile long counters[kMaxWorkers * 8] __attribute__((aligned(64)));

static volatile long sink;
static int ok;  /* what a worker that ran returns (its address) */

static void bump(long me) { counters[cfg.pad ? me * 8 : me]++; }

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
    if (cfg.place == 0) bump(me);
    for (long i = 0; i < cfg.jobwork; ++i) {
      acc += mine[(job + i) & 4095]++;
      if (cfg.place == 2 && (i & cfg.every) == 0) bump(me);
    }
    if (cfg.place == 1) bump(me);
  }
  free(mine);
  sink = acc;
  return &ok;
}

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    fprintf(stderr, "usage: pool_counters WORKERS JOBS JOBWORK PLACE PAD [EVERY]\n");
    return 2;
  }
  const int n = atoi(argv[1]);
  const long jobs = atol(argv[2]);
  cfg.jobwork = atol(argv[3]);
  cfg.place = atoi(argv[4]);
  cfg.pad = atoi(argv[5]);
  if (argc == 7) cfg.every = atol(argv[6]);
  if (n < 1 || n > kMaxWorkers || jobs < 0 || cfg.jobwork < 0 || cfg.place < 0 || cfg.place > 2 ||
      (cfg.pad != 0 && cfg.pad != 1) || cfg.every < 0 || cfg.every > (1L << 40) ||
      (cfg.every & (cfg.every + 1)) != 0) {
    fprintf(stderr, "pool_counters: WORKERS 1-%d, PLACE 0-2, PAD 0 or 1, EVERY a power of two less "
            "one (at most 2^40 - 1)\n", kMaxWorkers);
    return 2;
  }
  pthread_t t[kMaxWorkers];
  for (long i = 0; i < n; ++i)
    if (pthread_create(&t[i], NULL, worker, (void*)i) != 0) {
      fprintf(stderr, "pool_counters: cannot start a worker\n");
      return 1;  /* (the started ones die with the process) */
    }
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
  int failed = 0;
  for (int i = 0; i < n; ++i) {
    void* r = NULL;
    pthread_join(t[i], &r);
    failed |= r != &ok;  /* (a worker whose array could not be had) */
  }
  long sum = 0, expect = 0;
  for (int i = 0; i < kMaxWorkers * 8; ++i) sum += counters[i];
  if (cfg.place < 2) expect = jobs;
  else expect = jobs * ((cfg.jobwork + cfg.every) / (cfg.every + 1));
  printf("%ld\n", sum);
  return failed || sum != expect ? 1 : 0;
}
