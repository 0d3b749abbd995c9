/*
 * stress_sigmask.c -- threads that block every signal, and a handler whose mask
 * blocks every signal, running the same code as the main thread (robustness
 * test for the profiler, no cache problem, no fixed twin).
 *
 * Two worker threads run work() over their own arrays, every tenth pass with
 * all signals blocked (pthread_sigmask(SIG_BLOCK, full set)); the main thread installs a
 * SIGALRM handler with sa_mask = full set that also runs work() (on a small
 * array of its own), arms setitimer(ITIMER_REAL) at 1 ms and runs work() too.
 * A profiler that patches breakpoints into the program's code (soft mode's
 * trace windows) must keep such threads alive: a thread that traps with
 * SIGTRAP blocked is killed by the kernel.
 *
 * Usage: stress_sigmask [scale [passes]]   (scale >= 1 multiplies the work; passes per
 *        scale, default 15000: exact mode's tests run 1500, soft mode needs the CPU time)
 * Output: one line "stress_sigmask ok checksum=N" (the workers' and the main
 * thread's results, independent of how often the handler ran) and exit 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define WORDS 4096
#define PASSES_PER_SCALE 15000

static uint64_t worker_data[2][WORDS], main_data[WORDS], handler_data[64];
static volatile sig_atomic_t alarms;

/* argv[i] as a positive integer, or `dflt` when absent. */
static long parse_arg(int argc, char **argv, int i, long dflt) {
  if (argc <= i) return dflt;
  char *end = NULL;
  errno = 0;
  long s = strtol(argv[i], &end, 10);
  if (errno != 0 || end == argv[i] || *end != '\0' || s <= 0 || s > 1000000000L) {
    fprintf(stderr, "usage: %s [scale [passes per scale]] (positive integers)\n", argv[0]);
    exit(2);
  }
  return s;
}

/* Branches, calls and dependent loads: what breakpoints go on. */
__attribute__((noinline)) static uint64_t mix(uint64_t x) { return (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9u; }

__attribute__((noinline)) static uint64_t work(uint64_t *a, unsigned n, uint64_t p) {
  uint64_t s = 0;
  for (unsigned i = 0; i < n; i++) {
    a[i] = mix(a[i] + p);
    if (a[i] & 1) s += a[a[i] % n] >> 7;
    else s ^= a[i];
  }
  return s;
}

static void on_alarm(int sig) {
  (void)sig;
  int saved = errno;
  alarms = alarms + 1;
  work(handler_data, 64, (uint64_t)alarms);
  errno = saved;
}

static long g_passes;

/* Every tenth pass with every signal blocked: a profiler that looks at the masks now and then
 * mostly sees them open. */
static void *worker(void *arg) {
  uint64_t *a = arg;
  sigset_t all, old;
  sigfillset(&all);
  uint64_t s = 0;
  for (long p = 0; p < g_passes; p++) {
    if (p % 10 == 0) {
      pthread_sigmask(SIG_BLOCK, &all, &old);
      s += work(a, WORDS, (uint64_t)p);
      pthread_sigmask(SIG_SETMASK, &old, NULL);
    } else {
      s += work(a, WORDS, (uint64_t)p);
    }
  }
  a[0] ^= s;
  return NULL;
}

int main(int argc, char **argv) {
  g_passes = parse_arg(argc, argv, 1, 1) * parse_arg(argc, argv, 2, PASSES_PER_SCALE);
  for (unsigned i = 0; i < WORDS; i++) {
    worker_data[0][i] = i;
    worker_data[1][i] = i * 3u;
    main_data[i] = i * 7u;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigfillset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGALRM, &sa, NULL) != 0) {
    perror("sigaction");
    return 1;
  }
  struct itimerval it = {{0, 1000}, {0, 1000}};
  setitimer(ITIMER_REAL, &it, NULL);
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    if (pthread_create(&t[i], NULL, worker, worker_data[i]) != 0) {
      fprintf(stderr, "stress_sigmask FAIL: pthread_create\n");
      return 1;
    }
  uint64_t s = 0;
  for (long p = 0; p < g_passes; p++) s += work(main_data, WORDS, (uint64_t)p);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  struct itimerval off;
  memset(&off, 0, sizeof off);
  setitimer(ITIMER_REAL, &off, NULL);
  uint64_t sum = s;
  for (int w = 0; w < 2; w++)
    for (unsigned i = 0; i < WORDS; i++) sum = sum * 31 + worker_data[w][i];
  printf("stress_sigmask ok checksum=%llu\n", (unsigned long long)sum);
  return 0;
}
