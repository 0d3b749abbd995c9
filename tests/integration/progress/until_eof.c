/*
 * until_eof.c -- a program that runs as long as a test wants (the progress line's test,
 * progress_check.py).
 *
 * Usage: until_eof [ROUNDS]
 *   Without ROUNDS it updates a 4 MiB array, round after round, until its standard input
 *   reaches end of file (the test closes it once it has seen what it waits for); with ROUNDS it
 *   does that many rounds and ignores its input.
 * Output: 200 numbered lines and "done", the same whatever the number of rounds; the number of
 *   rounds goes to stderr ("rounds=N"), for the test to replay a run as long as another.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define WORDS (4u * 1024u * 1024u / sizeof(unsigned long))

int main(int argc, char **argv) {
  long want = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
  for (int i = 0; i < 200; ++i) printf("line %d of the program's own output\n", i);
  fflush(stdout);
  unsigned long *a = calloc(WORDS, sizeof *a);
  if (a == NULL) return 1;
  long rounds = 0;
  for (;;) {
    for (size_t i = 0; i < WORDS; i += 8) a[i] = a[i] * 3 + 1;
    ++rounds;
    if (want > 0) {
      if (rounds >= want) break;
      continue;
    }
    struct pollfd p = {0, POLLIN, 0};
    if (poll(&p, 1, 0) > 0) {
      char b[64];
      if (read(0, b, sizeof b) <= 0) break;
    }
  }
  const int odd = a[WORDS - 8] == 12345;  /* keeps the updates observable */
  free(a);
  printf("done\n");
  fprintf(stderr, "rounds=%ld\n", rounds);
  return odd ? 3 : 0;
}
