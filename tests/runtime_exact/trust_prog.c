// A whymiss-cc program for `whymiss record`'s own tests (record_test.cpp): what it does is the
// first argument.
//   wait           print "ready PID", then wait for signals forever
//   chdir DIR      change directory to DIR, then exit
//   setuid         become user and group 65534, then exit
//   exec PROG ...  replace itself with PROG (argv from PROG on)
//   exit N         exit with status N
//   segv           store through a null pointer (dies of SIGSEGV)
//   threads N      run N threads that each write a page of their own, join them, exit with 5
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long buf[4096];
static int* volatile null_ptr;  // volatile: the compiler cannot turn the store into a trap
static long pages[64][512];

static void* writer(void* arg) {
  long* page = arg;
  for (int r = 0; r < 16; ++r)
    for (int i = 0; i < 512; ++i) page[i] += i;
  return NULL;
}

int main(int argc, char** argv) {
  for (int i = 0; i < 4096; ++i) buf[i] = i;  // a few accesses, so the profile has some
  if (argc < 2) return 2;
  if (strcmp(argv[1], "wait") == 0) {
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;) pause();
  }
  if (strcmp(argv[1], "chdir") == 0 && argc == 3) return chdir(argv[2]) == 0 ? 0 : 3;
  if (strcmp(argv[1], "setuid") == 0) return setgid(65534) == 0 && setuid(65534) == 0 ? 0 : 3;
  if (strcmp(argv[1], "exit") == 0 && argc == 3) return atoi(argv[2]);
  if (strcmp(argv[1], "segv") == 0) {
    *null_ptr = 1;
    return 3;
  }
  if (strcmp(argv[1], "threads") == 0 && argc == 3) {
    int n = atoi(argv[2]);
    if (n < 1 || n > 64) return 2;
    pthread_t t[64];
    for (int i = 0; i < n; ++i)
      if (pthread_create(&t[i], NULL, writer, pages[i]) != 0) return 3;
    for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
    return 5;
  }
  if (strcmp(argv[1], "exec") == 0 && argc >= 3) {
    execv(argv[2], argv + 2);
    return 3;
  }
  return 2;
}
