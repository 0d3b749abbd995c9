/* A program for soft_runtime_test, run with libwhymiss-soft.so preloaded.
 *   work   CPU and memory work, then "ok"
 *   claim  installs its own handlers for SIGRTMIN+8..SIGRTMAX (the range whymiss picks its
 *          signal from), sends each to itself with sigqueue, works, checks every handler ran
 *   fork   forks; the child works and exits 0; the parent waits, works
 *   sigtrap  a second thread works while the main thread keeps changing SIGTRAP's disposition
 *          (ignored, a handler of its own, default) for 600 ms, then checks that its handler
 *          never ran and that sigaction() shows what it set last
 *   mutex  two threads increment one counter under one mutex for ~400 ms of CPU, counting the
 *          lock's hand-overs themselves; then an error-checking mutex unlocked by a thread
 *          that does not hold it must fail with EPERM, and errno must be as libc left it;
 *          prints "ok mutex COUNT handovers=N"
 * Output: one line starting with "ok" and exit 0, or "FAIL ..." and exit 1. */
#define _GNU_SOURCE
#include <errno.h>
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

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter, holder = -1, handovers;
static void *locker(void *arg) {
  long t = (long)(intptr_t)arg;
  uint64_t end = cpu_ns() + 400000000u;
  while (cpu_ns() < end)
    for (int i = 0; i < 1000; i++) {
      pthread_mutex_lock(&lock);
      counter++;
      if (holder != t) { holder = t; handovers++; }
      pthread_mutex_unlock(&lock);
    }
  return NULL;
}
static pthread_mutex_t checked;
static void *foreign_unlock(void *arg) {
  (void)arg;
  errno = 0;
  return (void *)(intptr_t)pthread_mutex_unlock(&checked);
}

/* Out of line, so that main (and the work it inlines, which other tests sample) stays as it was. */
static __attribute__((noinline)) int mutex_mode(void) {
  pthread_t th[2];
  for (long t = 0; t < 2; t++) pthread_create(&th[t], NULL, locker, (void *)(intptr_t)t);
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
  pthread_mutexattr_t at;
  pthread_mutexattr_init(&at);
  pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_init(&checked, &at);
  pthread_mutex_lock(&checked);
  pthread_t f;
  void *rc = NULL;
  pthread_create(&f, NULL, foreign_unlock, NULL);
  pthread_join(f, &rc);
  if ((intptr_t)rc != EPERM) { printf("FAIL foreign unlock returned %d\n", (int)(intptr_t)rc); return 1; }
  errno = 12345;
  if (pthread_mutex_unlock(&checked) != 0 || errno != 12345) { printf("FAIL own unlock\n"); return 1; }
  printf("ok mutex %ld handovers=%ld\n", counter, handovers);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "work";
  if (strcmp(mode, "mutex") == 0) return mutex_mode();
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
