/*
 * stress_sigprof.c -- the program uses SIGPROF itself (robustness test for
 * the profiler, no cache problem, no fixed twin).
 *
 * Installs its own SIGPROF handler with sigaction() and arms
 * setitimer(ITIMER_PROF) with a 1 ms interval, does some CPU and memory
 * work, then checks that its handler ran at least once.  A profiler that
 * uses SIGPROF (or any signal) must chain to, or leave alone, the program's
 * handler.  If the fixed amount of work ended before any tick (very coarse
 * timer), it keeps working, up to ~2 s of CPU time, until one arrives; that
 * extra work does not enter the checksum.
 *
 * Usage: stress_sigprof [scale]   (scale >= 1 multiplies the work)
 * Output: one line "stress_sigprof ok checksum=N" and exit status 0; on
 * failure "stress_sigprof FAIL: no SIGPROF received" and exit status 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define WORDS 8192 /* 64 KiB */
#define PASSES_PER_SCALE 2000

static volatile sig_atomic_t ticks;
static uint64_t data[WORDS];

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

static void on_sigprof(int sig) {
  (void)sig;
  int saved = errno;
  ticks = ticks + 1;
  errno = saved;
}

static uint64_t pass(uint64_t p) {
  uint64_t s = 0;
  for (unsigned i = 0; i < WORDS; i++) {
    data[i] = data[i] * 6364136223846793005u + p;
    s += data[i] >> 17;
  }
  return s;
}

int main(int argc, char **argv) {
  long passes = PASSES_PER_SCALE * parse_scale(argc, argv);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigprof;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGPROF, &sa, NULL) != 0) {
    perror("sigaction");
    return 1;
  }
  struct itimerval it;
  memset(&it, 0, sizeof it);
  it.it_interval.tv_usec = 1000;
  it.it_value.tv_usec = 1000;
  if (setitimer(ITIMER_PROF, &it, NULL) != 0) {
    perror("setitimer");
    return 1;
  }

  for (unsigned i = 0; i < WORDS; i++) data[i] = i;
  uint64_t checksum = 0;
  for (long p = 0; p < passes; p++) checksum += pass((uint64_t)p);

  /* Extra work (not in the checksum) until the first tick, bounded. */
  clock_t start = clock();
  volatile uint64_t sink = 0;
  while (ticks == 0 && clock() - start < 2 * CLOCKS_PER_SEC) sink += pass(sink);

  memset(&it, 0, sizeof it);
  setitimer(ITIMER_PROF, &it, NULL);

  if (ticks == 0) {
    printf("stress_sigprof FAIL: no SIGPROF received\n");
    return 1;
  }
  printf("stress_sigprof ok checksum=%llu\n", (unsigned long long)checksum);
  return 0;
}
