/* A loop of uncontended pthread mutex lock/unlock pairs (bench/soft_lock_cost.py): what soft
 * mode's interposed mutex calls cost a program that does little else.
 *   lock_loop N   N pairs on one mutex, one thread; prints the counter */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000000L;
  for (long i = 0; i < n; i++) {
    pthread_mutex_lock(&m);
    counter++;
    pthread_mutex_unlock(&m);
  }
  printf("%ld\n", counter);
  return 0;
}
