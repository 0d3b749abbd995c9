/*
 * signal_move.c -- threads whose SIGPROF handler makes memory accesses while exact mode's
 * parallel mode moves them onto the relay (tests/runtime_exact/CMakeLists.txt runs it with
 * WHYMISS_INTERLEAVE=parallel and WHYMISS_STRICT_AFTER).
 *
 * Each worker alternates a stretch of arithmetic on registers (no memory access) with a pass over
 * an array of its own. The handler, installed for the whole process with an ITIMER_PROF of 100 us
 * (the kernel rounds it up to its tick, ~4 ms), writes a few words of a global array and checks
 * that errno survived them. The main thread, asleep in pthread_join meanwhile, makes no access of
 * its own, so its first access after the move was asked for is its handler's, when a signal
 * lands on it: in the runs checked (a debugging print of the moving access's return address) the
 * main thread's move was made from inside the handler every time, the workers' mostly from their
 * own code. Afterwards the main thread
 * redoes every worker's computation itself and compares: a runtime that lost or corrupted the
 * program's state would show there.
 *
 * Output: "signal_move ok checksum=N" and exit 0; "signal_move FAIL: ..." and exit 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#define THREADS 4
#define WORDS 512
#define ROUNDS 300
#define SPIN 200000 /* ~0.2 ms natively: most of a worker's time, where the signals land */

static volatile sig_atomic_t ticks;
static volatile uint64_t handler_words[256];
static uint64_t arrays[THREADS][WORDS];
static uint64_t results[THREADS];

static volatile sig_atomic_t errno_changed;

/* errno, read without an instrumented access: the handler's first access may be the one that
 * moves the thread, and errno must be taken before it. */
__attribute__((no_sanitize_thread, noinline)) static int errno_now(void) { return errno; }

static void on_sigprof(int sig) {
  (void)sig;
  const int saved = errno_now();
  const unsigned k = (unsigned)ticks;
  ticks = ticks + 1;
  for (unsigned i = 0; i < 16; i++) handler_words[(k * 16 + i) % 256] += i + 1;
  /* The accesses above (and a move made by one of them) must leave errno as it was. */
  if (errno_now() != saved) errno_changed = 1;
  errno = saved;
}

/* Register-only work: the compiler keeps x in a register and may not drop the loop. */
static uint64_t spin(uint64_t x) {
  for (unsigned i = 0; i < SPIN; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

static uint64_t work(unsigned id) {
  uint64_t *a = arrays[id];
  uint64_t x = 0x9E3779B97F4A7C15ull * (id + 1);
  for (unsigned i = 0; i < WORDS; i++) a[i] = i * (id + 3);
  for (unsigned r = 0; r < ROUNDS; r++) {
    x = spin(x);
    for (unsigned i = 0; i < WORDS; i++) a[i] = a[i] * 6364136223846793005ull + (x >> (i & 31));
  }
  uint64_t s = 0;
  for (unsigned i = 0; i < WORDS; i++) s += a[i] >> 7;
  return s;
}

static void *worker(void *arg) {
  const unsigned id = (unsigned)(uintptr_t)arg;
  results[id] = work(id);
  return NULL;
}

int main(void) {
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
  it.it_interval.tv_usec = 100;
  it.it_value.tv_usec = 100;
  if (setitimer(ITIMER_PROF, &it, NULL) != 0) {
    perror("setitimer");
    return 1;
  }
  pthread_t t[THREADS];
  for (unsigned i = 0; i < THREADS; i++) {
    if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) != 0) {
      fprintf(stderr, "signal_move FAIL: pthread_create\n");
      return 1;
    }
  }
  for (unsigned i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  const uint64_t got[THREADS] = {results[0], results[1], results[2], results[3]};
  uint64_t checksum = 0;
  for (unsigned i = 0; i < THREADS; i++) {
    const uint64_t want = work(i);  /* (the timer still runs: the handler interrupts this too) */
    if (got[i] != want) {
      printf("signal_move FAIL: thread %u computed %llu, the main thread %llu\n", i,
             (unsigned long long)got[i], (unsigned long long)want);
      return 1;
    }
    checksum += want;
  }
  memset(&it, 0, sizeof it);
  setitimer(ITIMER_PROF, &it, NULL);
  if (ticks == 0) {
    printf("signal_move FAIL: no SIGPROF received\n");
    return 1;
  }
  if (errno_changed) {
    printf("signal_move FAIL: the handler's memory accesses changed errno\n");
    return 1;
  }
  printf("signal_move ok checksum=%llu\n", (unsigned long long)checksum);
  return 0;
}
