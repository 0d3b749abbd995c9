/* A mutex locked and unlocked 1000 times by one thread: glibc's lock word traffic is not
 * instrumented, so exact mode simulates it at the call sites (check_mutex.py). */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;

int main(void) {
  for (int i = 0; i < 1000; i++) {
    pthread_mutex_lock(&lock); /* LOCK */
    counter++;
    pthread_mutex_unlock(&lock); /* UNLOCK */
  }
  printf("%ld\n", counter);
  return 0;
}
