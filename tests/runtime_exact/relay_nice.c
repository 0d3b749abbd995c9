#define _GNU_SOURCE
// Prints the nice values of the exact runtime's relay thread (named "whymiss-relay"), of its
// miss-ratio worker ("whymiss-mrc") and of the main thread, read from /proc/self/task, while a
// second program thread exists (the relay starts with it). check_relay_nice.py runs it with and
// without WHYMISS_RELAY_NICE.
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile long sink[64];
static pthread_barrier_t ready, done;

static void *worker(void *arg) {
  (void)arg;
  for (long i = 0; i < 10000; i++) sink[i & 63] += i;
  pthread_barrier_wait(&ready);
  pthread_barrier_wait(&done);
  return NULL;
}

// The nice value (field 19 of /proc/self/task/TID/stat), or 100 when unreadable.
static int nice_of(const char *tid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
  FILE *f = fopen(path, "r");
  if (!f) return 100;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');  // the name may hold spaces; the fields after it do not
  if (!p) return 100;
  int field = 2, nice = 100;
  for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " "))
    if (++field == 19) nice = atoi(tok);
  return nice;
}

int main(void) {
  pthread_t t;
  pthread_barrier_init(&ready, NULL, 2);
  pthread_barrier_init(&done, NULL, 2);
  if (pthread_create(&t, NULL, worker, NULL) != 0) return 2;
  pthread_barrier_wait(&ready);
  for (long i = 0; i < 10000; i++) sink[i & 63] -= i;
  char self[32];
  snprintf(self, sizeof self, "%d", (int)getpid());
  // The runtime's threads set their nice, then their name, as they start, on their own thread:
  // look until both have (within 5 s; they have long before, as the worker's accesses needed the
  // relay to simulate them).
  int relay = 100, relays = 0, mrc = 100, mrcs = 0;
  for (int tries = 0; (relays == 0 || mrcs == 0) && tries < 5000; tries++) {
    if (tries > 0) nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    relays = mrcs = 0;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d && (e = readdir(d));) {
      if (e->d_name[0] == '.') continue;
      char path[64], name[64] = {0};
      snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
      FILE *f = fopen(path, "r");
      if (!f) continue;
      if (fgets(name, sizeof name, f) && strncmp(name, "whymiss-relay", 13) == 0) {
        relay = nice_of(e->d_name);
        relays++;
      } else if (strncmp(name, "whymiss-mrc", 11) == 0) {
        mrc = nice_of(e->d_name);
        mrcs++;
      }
      fclose(f);
    }
    if (d) closedir(d);
  }
  printf("relays %d relay_nice %d main_nice %d workers %d worker_nice %d\n", relays, relay,
         nice_of(self), mrcs, mrc);
  pthread_barrier_wait(&done);
  pthread_join(t, NULL);
  return 0;
}
