/* A thread-free loop run three ways: alone (mode 0), after creating and joining a thread that
 * does nothing (mode 1: the relay takes over at pthread_create and, once the loop has run alone
 * for a while, lends the simulator back to this thread), and while a second thread sleeps and
 * then writes 1000 words (mode 2: the loan is revoked when it wakes). Exact mode must count
 * the loop the same way in all three. Prints nothing but a checksum. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WORDS (1u << 19) /* 4 MiB: misses L1 and L2 on every pass */
#define PASSES 96
#define LATE_WRITES 1000

static volatile uint64_t late[LATE_WRITES];

static void *idle(void *arg) { return arg; }

static void *sleeper(void *arg) {
  struct timespec ts = {0, 150 * 1000 * 1000};
  nanosleep(&ts, NULL);
  for (unsigned i = 0; i < LATE_WRITES; i++) late[i] = i;
  return arg;
}

int main(int argc, char **argv) {
  int mode = argc > 1 ? atoi(argv[1]) : 0;
  volatile uint64_t *a = malloc(WORDS * sizeof(uint64_t));
  if (!a) return 1;
  pthread_t th;
  if (mode == 1) {
    pthread_create(&th, NULL, idle, NULL);
    pthread_join(th, NULL);
  } else if (mode == 2) {
    pthread_create(&th, NULL, sleeper, NULL);
  }
  uint64_t sum = 0;
  for (unsigned p = 0; p < PASSES; p++)
    for (unsigned i = 0; i < WORDS; i += 8) sum += a[i];
  if (mode == 2) pthread_join(th, NULL);
  printf("%lu\n", (unsigned long)sum);
  return 0;
}
