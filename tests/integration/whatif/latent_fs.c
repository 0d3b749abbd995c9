/*
 * latent_fs.c -- false sharing that depends on where an object lands (Predator's latent case).
 *
 * One heap object (aligned_alloc(128, SIZE), zeroed) holds two 8-byte fields: thread 1 writes
 * `a`, thread 2 writes `b`. The threads take turns (mutex + condition variable), ROUNDS turns
 * each, a few writes per turn, so the interleaving is the same in every run. The object's bytes
 * are used from byte OFFSET of the block (argv), which models the allocator placing it there.
 *
 *   near: a at 40..47, b at 64..71 (object offsets). At OFFSET 0 they lie in two 64-byte lines:
 *         no false sharing. Moved by 24..56 bytes, a crosses into b's line (40 + 24 = 64): false
 *         sharing at every turn; moved by 8 or 16 it does not. With 128-byte lines at a
 *         128-aligned start, both lie in one line (false sharing); started 64 bytes further,
 *         they do not (a at 104, b at 128).
 *   far:  a at 0..7, b at 256..263: no move by less than a line and no 128-byte line puts them
 *         together: no false sharing at any placement.
 *
 * Usage: latent_fs [near|far [OFFSET [ROUNDS]]]   (default: near 0)   Output: one checksum line.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE 512
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;  /* 0: thread 1's turn, 1: thread 2's */
static long rounds = 4000;
static volatile long *fields[2];

static void *worker(void *arg) {
  const int me = (int)(long)arg;
  for (long r = 0; r < rounds; ++r) {
    pthread_mutex_lock(&mu);
    while (turn != me) pthread_cond_wait(&cv, &mu);
    for (int k = 0; k < 4; ++k) *fields[me] += k + 1;
    turn = 1 - me;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "near") != 0 && strcmp(argv[1], "far") != 0) {
    fprintf(stderr, "usage: %s [near|far [OFFSET [ROUNDS]]]\n", argv[0]);
    return 2;
  }
  const long offset = argc > 2 ? atol(argv[2]) : 0;
  if (offset < 0 || offset > 64) {
    fprintf(stderr, "OFFSET must be 0..64\n");
    return 2;
  }
  if (argc > 3) rounds = atol(argv[3]);
  const int near = argc < 2 || strcmp(argv[1], "near") == 0;
  char *block = aligned_alloc(128, SIZE);
  if (!block) return 1;
  memset(block, 0, SIZE);
  char *obj = block + offset;
  fields[0] = (volatile long *)(obj + (near ? 40 : 0));
  fields[1] = (volatile long *)(obj + (near ? 64 : 256));
  pthread_t t[2];
  for (long i = 0; i < 2; ++i) pthread_create(&t[i], NULL, worker, (void *)i);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  printf("latent_fs %ld\n", *fields[0] + *fields[1]);
  free(block);
  return 0;
}
