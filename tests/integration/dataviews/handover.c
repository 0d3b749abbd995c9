// Known answer for `report --view flow`: kMessages messages of one cache line each, allocated by
// the main thread (T0), written by a producer thread (T1), then read by a consumer thread (T2).
// Per message: the producer's first write misses (its first touch: a handover from the
// allocation), and so does the consumer's first read (the line is modified in the producer's
// cache): the flow of this site is exactly alloc T0 -> write T1 (kMessages handovers, kMessages
// L1 misses) and write T1 -> read T2 (the same), and nothing else.
//
// The consumer starts after the producer is joined (no sleeps), so all of its reads are simulated
// after all of the producer's writes.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { kMessages = 64 };

struct message {  // 64 bytes, 64-byte aligned: one line each
  long seq;
  long payload[7];
};

static struct message* messages[kMessages];
static long total;

static void* producer(void* arg) {
  (void)arg;
  for (int i = 0; i < kMessages; ++i) {
    messages[i]->seq = i;
    for (int j = 0; j < 7; ++j) messages[i]->payload[j] = (long)i * j;
  }
  return NULL;
}

static void* consumer(void* arg) {
  (void)arg;
  long sum = 0;
  for (int i = 0; i < kMessages; ++i) {
    sum += messages[i]->seq;
    for (int j = 0; j < 7; ++j) sum += messages[i]->payload[j];
  }
  total = sum;
  return NULL;
}

int main(void) {
  for (int i = 0; i < kMessages; ++i) {
    messages[i] = aligned_alloc(64, sizeof(struct message));
    if (!messages[i]) return 1;
  }
  pthread_t p, c;
  if (pthread_create(&p, NULL, producer, NULL)) return 1;
  pthread_join(p, NULL);
  if (pthread_create(&c, NULL, consumer, NULL)) return 1;
  pthread_join(c, NULL);
  printf("%ld\n", total);
  return 0;
}
