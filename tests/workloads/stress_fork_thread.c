/*
 * stress_fork_thread.c -- fork() called from a non-main thread while another
 * thread runs (robustness test for the profiler, no cache problem, no fixed
 * twin).
 *
 * The main thread starts a background thread that does memory work and a
 * "forker" thread.  Per unit of scale, the forker does some work, calls
 * fork(); the child (a copy of the forker thread only) mallocs, does a
 * little work and leaves with exit() -- so atexit handlers and library
 * destructors run in a child whose creating thread was not the main thread.
 * The forker waits for the child and checks its exit status.  The main
 * thread joins both threads.
 *
 * Usage: stress_fork_thread [scale]   (scale >= 1 multiplies forks and work)
 * Output: one checksum line; exit status 0 (1 if a child misbehaved).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORDS 8192 /* 64 KiB */
#define BG_PASSES_PER_SCALE 200

static long scale;

static long parse_scale(int argc, char **argv) {
  if (argc < 2) return 1;
  char *end = NULL;
  errno = 0;
  long s = strtol(argv[1], &end, 10);
  if (errno != 0 || end == argv[1] || *end != '\0' || s <= 0) {
    fprintf(stderr, "usage: %s [scale (positive integer)]\n", argv[0]);
    exit(2);
  }
  return s;
}

static uint64_t work(uint64_t seed, int passes) {
  uint64_t *buf = malloc(WORDS * sizeof *buf);
  if (buf == NULL) return 0;
  for (unsigned i = 0; i < WORDS; i++) buf[i] = seed + i * 0x9e3779b97f4a7c15u;
  uint64_t s = 0;
  for (int p = 0; p < passes; p++)
    for (unsigned i = 0; i < WORDS; i++) s += buf[i] >> (p & 7);
  free(buf);
  return s;
}

static void *background(void *arg) {
  uint64_t *out = arg;
  *out = work(12345u, (int)(BG_PASSES_PER_SCALE * scale));
  return NULL;
}

static void *forker(void *arg) {
  uint64_t *out = arg;
  uint64_t sum = 0;
  for (long r = 0; r < scale; r++) {
    uint64_t seed = (uint64_t)r + 1u;
    sum += work(seed, 4);
    int expect = (int)(work(seed * 31u, 8) % 113u) + 1;
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      exit(1);
    }
    if (pid == 0) exit((int)(work(seed * 31u, 8) % 113u) + 1);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
      if (errno != EINTR) {
        perror("waitpid");
        exit(1);
      }
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != expect) {
      fprintf(stderr, "stress_fork_thread: child status 0x%x, expected exit %d\n", st, expect);
      exit(1);
    }
    sum += (uint64_t)expect;
  }
  *out = sum;
  return NULL;
}

int main(int argc, char **argv) {
  scale = parse_scale(argc, argv);
  fflush(NULL);
  uint64_t bg_result = 0, fork_result = 0;
  pthread_t bg, fk;
  if (pthread_create(&bg, NULL, background, &bg_result) != 0 ||
      pthread_create(&fk, NULL, forker, &fork_result) != 0) {
    fprintf(stderr, "pthread_create failed\n");
    return 1;
  }
  pthread_join(fk, NULL);
  pthread_join(bg, NULL);
  printf("stress_fork_thread checksum=%llu\n", (unsigned long long)(bg_result + fork_result));
  return 0;
}
