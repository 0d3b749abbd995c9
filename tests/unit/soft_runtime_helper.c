/* A program for soft_runtime_test, run with libwhymiss-soft.so preloaded.
 *   work   CPU and memory work, then "ok"
 *   claim  installs its own handlers for SIGRTMIN+8..SIGRTMAX (the range whymiss picks its
 *          signal from), sends each to itself with sigqueue, works, checks every handler ran
 *   fork   forks; the child works and exits 0; the parent waits, works
 *   sigtrap  a second thread works while the main thread keeps changing SIGTRAP's disposition
 *          (ignored, a handler of its own, default) for 600 ms, then checks that its handler
 *          never ran and that sigaction() shows what it set last
 * Output: one line starting with "ok" and exit 0, or "FAIL ..." and exit 1. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got[80];

static void on_rt(int s, siginfo_t *si, void *ctx) {
  (void)ctx;
  if (si->si_code == SI_QUEUE && si->si_value.sival_int == s) got[s]++;
}

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sweeps a heap array for ~ms milliseconds of CPU time. */
static uint64_t work(int ms) {
  size_t n = 1 << 18;
  uint64_t *a = malloc(n * sizeof *a), s = 0;
  if (!a) exit(1);
  for (size_t i = 0; i < n; i++) a[i] = i;
  uint64_t end = cpu_ns() + (uint64_t)ms * 1000000u;
  while (cpu_ns() < end)
    for (size_t i = 0; i < n; i++) s += a[i] = a[i] * 3 + 1;
  free(a);
  return s;
}

static volatile sig_atomic_t traps;
static void on_trap(int s) { (void)s; traps++; }
static void *worker(void *arg) {
  (void)arg;
  (void)work(600);
  return NULL;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "work";
  if (strcmp(mode, "claim") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_rt;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (int s = SIGRTMIN + 8; s <= SIGRTMAX; s++)
      if (sigaction(s, &sa, NULL) != 0) { printf("FAIL sigaction %d\n", s); return 1; }
    for (int s = SIGRTMIN + 8; s <= SIGRTMAX; s++) {
      struct sigaction cur;
      if (sigaction(s, NULL, &cur) != 0 || cur.sa_sigaction != on_rt) {
        printf("FAIL signal %d does not show the program's handler\n", s);
        return 1;
      }
      union sigval v = {.sival_int = s};
      sigqueue(getpid(), s, v);
    }
    work(300);
    for (int s = SIGRTMIN + 8; s <= SIGRTMAX; s++)
      if (got[s] != 1) { printf("FAIL handler of signal %d ran %d times\n", s, (int)got[s]); return 1; }
    printf("ok claim\n");
    return 0;
  }
  if (strcmp(mode, "sigtrap") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 1;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
      signal(SIGTRAP, SIG_IGN);
      signal(SIGTRAP, on_trap);
      signal(SIGTRAP, SIG_DFL);
      signal(SIGTRAP, on_trap);
      clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 600);
    pthread_join(t, NULL);
    struct sigaction cur;
    if (sigaction(SIGTRAP, NULL, &cur) != 0 || cur.sa_handler != on_trap) { printf("FAIL sigaction view\n"); return 1; }
    if (traps) { printf("FAIL the program's handler got %d traps\n", (int)traps); return 1; }
    printf("ok sigtrap\n");
    return 0;
  }
  if (strcmp(mode, "fork") == 0) {
    pid_t c = fork();
    if (c < 0) return 1;
    if (c == 0) { work(200); _exit(0); }
    int st = 0;
    if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0) { printf("FAIL child\n"); return 1; }
    work(200);
    printf("ok fork\n");
    return 0;
  }
  work(300);
  printf("ok work\n");
  return 0;
}
