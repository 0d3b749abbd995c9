/*
 * cancelled_worker.c -- a worker thread that the main thread cancels (pthread_cancel) while it
 * sweeps an array of its own, reaching pthread_testcancel once per 64 sweeps. Under whymiss's parallel
 * mode the worker's accesses run the runtime's pacing, which looks at the main thread (asleep,
 * then in pthread_join) in /proc: with libc's open/read/close there, cancellation points, the
 * worker was cancelled inside the runtime, whose noexcept frames turned the unwinding into
 * std::terminate (SIGABRT). Exit status 0 when the join reports a cancelled thread.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

enum { kWords = 1 << 14 };
static unsigned long words[kWords];

static void *sweep(void *arg) {
  (void)arg;
  unsigned long sum = 0;
  for (unsigned long pass = 0;; ++pass) {
    for (unsigned i = 0; i < kWords; ++i) {
      words[i] += i ^ pass;
      sum += words[i];
    }
    if (pass % 64 == 63) pthread_testcancel();  // (a million accesses apart: the runtime's
                                               // pacing looks at the main thread in between)
  }
  return (void *)sum;
}

int main(void) {
  pthread_t worker;
  if (pthread_create(&worker, NULL, sweep, NULL) != 0) return 2;
  usleep(150 * 1000);
  pthread_cancel(worker);
  void *result = NULL;
  pthread_join(worker, &result);
  printf("worker %s\n", result == PTHREAD_CANCELED ? "cancelled" : "not cancelled");
  return result == PTHREAD_CANCELED ? 0 : 1;
}
