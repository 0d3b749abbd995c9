/* Known answer for the relay's order between threads: a writer thread writes one word of each of
 * LINES heap lines, then hands them to a reader thread, which reads them all. The hand-over is
 * a join (the reader is created after the writer is joined), an atomic flag (release/acquire),
 * or a flag under a mutex with a condition variable. Each line is first touched by the writer, so
 * the writer's line (WRITE) misses the shared L3 once per line, and the reader's (READ) never
 * does: the lines are in L3 by then. A read simulated before the write it follows would be the
 * line's first touch instead (an L3 miss on READ, one fewer on WRITE).
 * FIRST (default 0): threads created and joined before the writer, which touch no memory, so that
 * the writer and the reader have thread numbers past exact mode's parallel cores (64).
 * Usage: joined_handover [join|atomic|cond] [lines] [first]. Prints the reader's sum. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long *buf;
static int lines = 256;
static int flag;
static int mode; /* 0 join, 1 atomic, 2 cond */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long total;

static void *writer(void *arg) {
  (void)arg;
  for (int i = 0; i < lines; i++) buf[i * 8] = i; /* WRITE */
  if (mode == 1) __atomic_store_n(&flag, 1, __ATOMIC_RELEASE);
  if (mode == 2) {
    pthread_mutex_lock(&mu);
    flag = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
  }
  return NULL;
}

static void *reader(void *arg) {
  (void)arg;
  if (mode == 1)
    while (!__atomic_load_n(&flag, __ATOMIC_ACQUIRE)) {
    }
  if (mode == 2) {
    pthread_mutex_lock(&mu);
    while (!flag) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
  }
  long s = 0;
  for (int i = 0; i < lines; i++) s += buf[i * 8]; /* READ */
  total = s;
  return NULL;
}

static void *idle(void *arg) { return arg; }

int main(int argc, char **argv) {
  if (argc > 1) mode = strcmp(argv[1], "atomic") == 0 ? 1 : strcmp(argv[1], "cond") == 0 ? 2 : 0;
  if (argc > 2) lines = atoi(argv[2]);
  const int first = argc > 3 ? atoi(argv[3]) : 0;
  if (lines < 1 || lines > 4096 || first < 0 || first > 1000) return 2;
  for (int i = 0; i < first; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, idle, NULL)) return 1;
    pthread_join(t, NULL);
  }
  buf = aligned_alloc(64, (size_t)lines * 64);
  if (!buf) return 1;
  pthread_t w, r;
  if (mode == 0) {
    if (pthread_create(&w, NULL, writer, NULL)) return 1;
    pthread_join(w, NULL);
    if (pthread_create(&r, NULL, reader, NULL)) return 1;
  } else {
    if (pthread_create(&r, NULL, reader, NULL)) return 1;
    if (pthread_create(&w, NULL, writer, NULL)) return 1;
    pthread_join(w, NULL);
  }
  pthread_join(r, NULL);
  printf("%ld\n", total);
  return total == (long)lines * (lines - 1) / 2 ? 0 : 1;
}
