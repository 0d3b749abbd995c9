/*
 * stress_threads.c -- thread churn (robustness test for the profiler, no
 * cache problem to report, no fixed twin).
 *
 * Creates and joins 64 threads per round, 4 rounds per unit of scale.  Each
 * thread fills and sums a private heap buffer and a private stack array,
 * adds its result to a shared global total (atomic) and writes its own slot
 * of a shared global array.  The profiler must follow every thread start and
 * exit (thread ids, per-thread buffers) without losing or corrupting data.
 *
 * Usage: stress_threads [scale]   (scale >= 1 multiplies the rounds)
 * Output: one checksum line; exit status 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NTHREADS 64
#define ROUNDS_PER_SCALE 4
#define PRIVATE_WORDS 1024 /* 8 KiB private heap buffer per thread */
#define STACK_WORDS 256

static uint64_t shared_total;          /* updated atomically by all threads */
static uint64_t shared_slots[NTHREADS]; /* slot t written only by thread t */

static long parse_scale(int argc, char **argv) {
  if (argc < 2) return 1;
  char *end = NULL;
  errno = 0;
  long s = strtol(argv[1], &end, 10);
  if (errno != 0 || end == argv[1] || *end != '\0' || s <= 0) {
    fprintf(stderr, "usage: %s [scale (positive integer)]\n", argv[0]);
    exit(2);
  }
  return s;
}

struct task {
  unsigned id;
  unsigned round;
};

static void *worker(void *arg) {
  const struct task *tk = arg;
  uint64_t seed = (uint64_t)tk->id * 1000003u + tk->round;

  uint64_t *priv = malloc(PRIVATE_WORDS * sizeof *priv);
  if (priv == NULL) {
    fprintf(stderr, "malloc failed\n");
    exit(1);
  }
  volatile uint64_t stack_buf[STACK_WORDS];
  for (unsigned i = 0; i < PRIVATE_WORDS; i++) priv[i] = seed * (i + 1u);
  for (unsigned i = 0; i < STACK_WORDS; i++) stack_buf[i] = seed + i;

  uint64_t local = 0;
  for (int rep = 0; rep < 4; rep++) {
    for (unsigned i = 0; i < PRIVATE_WORDS; i++) local += priv[i] ^ (uint64_t)rep;
    for (unsigned i = 0; i < STACK_WORDS; i++) local += stack_buf[i];
  }
  free(priv);

  __atomic_fetch_add(&shared_total, local, __ATOMIC_RELAXED);
  shared_slots[tk->id] += local & 0xffff;
  return NULL;
}

int main(int argc, char **argv) {
  long rounds = ROUNDS_PER_SCALE * parse_scale(argc, argv);
  pthread_t th[NTHREADS];
  struct task tasks[NTHREADS];

  for (long r = 0; r < rounds; r++) {
    for (unsigned t = 0; t < NTHREADS; t++) {
      tasks[t].id = t;
      tasks[t].round = (unsigned)r;
      int rc = pthread_create(&th[t], NULL, worker, &tasks[t]);
      if (rc != 0) {
        fprintf(stderr, "pthread_create failed: %d\n", rc);
        return 1;
      }
    }
    for (unsigned t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  }

  uint64_t sum = __atomic_load_n(&shared_total, __ATOMIC_RELAXED);
  for (unsigned t = 0; t < NTHREADS; t++) sum += shared_slots[t];
  printf("stress_threads checksum=%llu\n", (unsigned long long)sum);
  return 0;
}
