/*
 * pointer_chase.c -- capacity misses of pointer chasing.
 * 16,384 nodes of 64 bytes (1 MiB, more than any L1) are linked in a shuffled order and the
 * list is walked repeatedly: every node is a new line, reached through the pointer the
 * previous node held. Expected: capacity at L1, pattern "pointer_chase"; fix: lay the nodes
 * out in traversal order.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NODES 16384
struct node {
  struct node *next;
  uint64_t key;
  char pad[48];
};

int main(int argc, char **argv) {
  const long scale = argc > 1 ? atol(argv[1]) : 1; /* optional scale */
  struct node *nodes = malloc(sizeof(struct node) * NODES);
  uint32_t *order = malloc(sizeof(uint32_t) * NODES);
  if (!nodes || !order) return 1;
  for (uint32_t i = 0; i < NODES; i++) order[i] = i;
  uint64_t x = 88172645463325252ull;  /* xorshift: the same shuffle on every run */
  for (uint32_t i = NODES - 1; i > 0; i--) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint32_t j = (uint32_t)(x % (i + 1));
    uint32_t t = order[i]; order[i] = order[j]; order[j] = t;
  }
  for (uint32_t i = 0; i < NODES; i++) {
    nodes[order[i]].next = &nodes[order[(i + 1) % NODES]];
    nodes[order[i]].key = i;
  }
  uint64_t sum = 0;
  const struct node *p = &nodes[order[0]];
  for (long step = 0; step < 6L * NODES * scale; step++) {
    sum += p->key;
    p = p->next;
  }
  printf("pointer_chase %llu\n", (unsigned long long)sum);
  free(order);
  free(nodes);
  return 0;
}
