/* Producer/consumer hand-off through an atomic flag: each round the producer writes LINES lines,
 * then releases the flag; the consumer acquires it, reads the lines and releases the flag back.
 * Every consumer read follows a producer write of its line, so from the second round on each one
 * is a true-sharing miss. Usage: handoff [rounds] (default 2000). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define LINES 64
static long data[LINES * 8] __attribute__((aligned(64)));  /* one long per 64-byte line */
static int flag __attribute__((aligned(64)));
static long rounds = 2000;

static void *consumer(void *arg) {
  (void)arg;
  long sum = 0;
  for (long r = 0; r < rounds; r++) {
    while (__atomic_load_n(&flag, __ATOMIC_ACQUIRE) != 1) {
    }
    for (int i = 0; i < LINES; i++) sum += data[i * 8];
    __atomic_store_n(&flag, 0, __ATOMIC_RELEASE);
  }
  return (void *)sum;
}

int main(int argc, char **argv) {
  if (argc > 1) rounds = atol(argv[1]);
  pthread_t t;
  if (pthread_create(&t, NULL, consumer, NULL) != 0) return 1;
  for (long r = 0; r < rounds; r++) {
    while (__atomic_load_n(&flag, __ATOMIC_ACQUIRE) != 0) {
    }
    for (int i = 0; i < LINES; i++) data[i * 8] = r + i;
    __atomic_store_n(&flag, 1, __ATOMIC_RELEASE);
  }
  void *sum;
  pthread_join(t, &sum);
  printf("%ld\n", (long)sum);
  return 0;
}
