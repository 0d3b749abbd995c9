/* Producer/consumer hand-off: each round the producer writes LINES lines, then hands them over;
 * the consumer takes them, reads the lines and hands the turn back. Every consumer read follows a
 * producer write of its line, so from the second round on each one is a true-sharing miss.
 * Usage: handoff [rounds] [atomic|mutex]: the hand-over is an atomic flag (release/acquire) or a
 * flag under a mutex. Default: 2000 rounds, atomic. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINES 64
static long data[LINES * 8] __attribute__((aligned(64))); /* one long per 64-byte line */
static int flag __attribute__((aligned(64)));
static long rounds = 2000;
static int use_mutex;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Waits until the flag is `want`. With the mutex, returns holding it. */
static void wait_for(int want) {
  if (use_mutex) {  /* polls, so that both threads keep the relay busy (a backlog to reorder) */
    pthread_mutex_lock(&mu);
    while (flag != want) {
      pthread_mutex_unlock(&mu);
      pthread_mutex_lock(&mu);
    }
    return;
  }
  while (__atomic_load_n(&flag, __ATOMIC_ACQUIRE) != want) {
  }
}

static void hand_over(int value) {
  if (use_mutex) {
    flag = value;
    pthread_mutex_unlock(&mu);
    return;
  }
  __atomic_store_n(&flag, value, __ATOMIC_RELEASE);
}

static void *consumer(void *arg) {
  (void)arg;
  long sum = 0;
  for (long r = 0; r < rounds; r++) {
    wait_for(1);
    for (int i = 0; i < LINES; i++) sum += data[i * 8];
    hand_over(0);
  }
  return (void *)sum;
}

int main(int argc, char **argv) {
  if (argc > 1) rounds = atol(argv[1]);
  use_mutex = argc > 2 && strcmp(argv[2], "mutex") == 0;
  pthread_t t;
  if (pthread_create(&t, NULL, consumer, NULL) != 0) return 1;
  for (long r = 0; r < rounds; r++) {
    wait_for(0);
    for (int i = 0; i < LINES; i++) data[i * 8] = r + i;
    hand_over(1);
  }
  void *sum;
  pthread_join(t, &sum);
  printf("%ld\n", (long)sum);
  return 0;
}
