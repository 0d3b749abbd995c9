/* Two threads, each on data of its own: one line it increments on every iteration (its core
 * holds it modified, so after the first few iterations these are held hits, taken by the thread
 * itself, see src/runtime/exact/hit_path.h) and, every 64th iteration, one line of a 256 KiB
 * array of its own (always an L1 miss: the relay simulates it). Nothing is shared, so the counts
 * do not depend on how the threads interleave, and the test knows them exactly. Prints a
 * checksum. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ITERS (64ul * 4096 * 3) /* three passes over the array */
#define LINES 4096              /* 256 KiB: more than L1, less than L2 */

struct slot {
  volatile uint64_t v;
  const uint64_t *arr;
  uint64_t sum;
} __attribute__((aligned(64)));

static struct slot slots[2];

static void *worker(void *arg) {
  struct slot *own = arg;
  const uint64_t *arr = own->arr;
  uint64_t sum = 0;
  for (unsigned long i = 0; i < ITERS; i++) {
    own->v += 1;
    if ((i & 63) == 0) sum += arr[((i >> 6) % LINES) * 8];
  }
  own->sum = sum;
  return NULL;
}

int main(void) {
  pthread_t th[2];
  for (int t = 0; t < 2; t++) {
    slots[t].arr = calloc(LINES * 8, sizeof(uint64_t));
    if (!slots[t].arr) return 1;
  }
  for (int t = 0; t < 2; t++)
    if (pthread_create(&th[t], NULL, worker, &slots[t]) != 0) return 1;
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
  printf("%lu\n", (unsigned long)(slots[0].v + slots[1].v + slots[0].sum + slots[1].sum));
  return 0;
}
