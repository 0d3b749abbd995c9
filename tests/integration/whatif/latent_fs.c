/*
 * latent_fs.c -- false sharing that depends on where an object lands (Predator's latent case).
 *
 * One heap object (aligned_alloc(128, SIZE), zeroed; a struct whose DWARF names its members)
 * holds two 8-byte fields: thread 1 writes `a` (member `sent`), thread 2 writes `b` (member
 * `received`). The threads take turns (mutex + condition variable), ROUNDS turns
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE 512
/* The two layouts, SIZE bytes each: a and b are `sent` and `received`. */
struct near_stats {
  char name[40];
  long sent;     /* 40..47 */
  char flags[16];
  long received; /* 64..71 */
  char rest[SIZE - 72];
};
struct far_stats {
  long sent;     /* 0..7 */
  char gap[248];
  long received; /* 256..263 */
  char rest[SIZE - 264];
};
_Static_assert(sizeof(struct near_stats) == SIZE && sizeof(struct far_stats) == SIZE, "layout");
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
  /* Each allocation stores to a pointer of its struct type, so the report can name the fields
     (at OFFSET 0; moved, the bytes used are no longer the members the type puts there). */
  char *block;
  if (near) {
    struct near_stats *s = aligned_alloc(128, sizeof *s);
    block = (char *)s;
  } else {
    struct far_stats *s = aligned_alloc(128, sizeof *s);
    block = (char *)s;
  }
  if (!block) return 1;
  memset(block, 0, SIZE);
  char *obj = block + offset;
  const size_t a = near ? offsetof(struct near_stats, sent) : offsetof(struct far_stats, sent);
  const size_t b = near ? offsetof(struct near_stats, received) : offsetof(struct far_stats, received);
  fields[0] = (volatile long *)(obj + a);
  fields[1] = (volatile long *)(obj + b);
  pthread_t t[2];
  for (long i = 0; i < 2; ++i) pthread_create(&t[i], NULL, worker, (void *)i);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  printf("latent_fs %ld\n", *fields[0] + *fields[1]);
  free(block);
  return 0;
}
