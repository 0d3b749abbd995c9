/*
 * stress_fork_exec.c -- fork / exec / child exit (robustness test for the
 * profiler, no cache problem, no fixed twin).
 *
 * Per unit of scale, the parent:
 *   1. forks a child that execs /bin/true;
 *   2. forks a child that execs this very program (/proc/self/exe) with the
 *      arguments "--exec-child SEED": the re-executed program does some work
 *      and exits with a status derived from it;
 *   3. forks a child that does some work without exec and leaves with exit()
 *      (so atexit handlers / library destructors run in the child);
 * and does some work of its own.  It waits for every child and checks its
 * exit status.  Children never write to stdout.
 *
 * Usage: stress_fork_exec [scale]   (scale >= 1 multiplies the rounds)
 * Output: one checksum line; exit status 0 (1 if a child misbehaved).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORK_WORDS 16384 /* 128 KiB */

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

/* Some deterministic memory work. */
static uint64_t work(uint64_t seed) {
  uint64_t *buf = malloc(WORK_WORDS * sizeof *buf);
  if (buf == NULL) return 0;
  for (unsigned i = 0; i < WORK_WORDS; i++) buf[i] = seed ^ (i * 0x9e3779b97f4a7c15u);
  uint64_t s = 0;
  for (int rep = 0; rep < 4; rep++)
    for (unsigned i = 0; i < WORK_WORDS; i++) s += buf[(i * 7u) % WORK_WORDS] >> rep;
  free(buf);
  return s;
}

static int child_status(uint64_t seed) { return (int)(work(seed) % 61u) + 1; /* 1..61 */ }

/* Wait for pid; return its exit status, or -1 if it did not exit normally. */
static int wait_exit(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--exec-child") == 0) {
    uint64_t seed = strtoull(argv[2], NULL, 10);
    return child_status(seed);
  }
  long rounds = parse_scale(argc, argv);
  uint64_t checksum = 0;

  for (long r = 0; r < rounds; r++) {
    fflush(NULL);

    /* 1. fork + exec /bin/true */
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      execl("/bin/true", "true", (char *)NULL);
      _exit(127);
    }
    if (wait_exit(pid) != 0) {
      fprintf(stderr, "stress_fork_exec: /bin/true child failed\n");
      return 1;
    }

    /* 2. fork + exec self */
    uint64_t seed = (uint64_t)r * 7919u + 17u;
    char seed_arg[32];
    snprintf(seed_arg, sizeof seed_arg, "%llu", (unsigned long long)seed);
    pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], "--exec-child", seed_arg, (char *)NULL);
      _exit(127);
    }
    int st = wait_exit(pid);
    if (st != child_status(seed)) {
      fprintf(stderr, "stress_fork_exec: exec'd child returned %d\n", st);
      return 1;
    }
    checksum += (uint64_t)st;

    /* 3. fork, work, exit() without exec */
    seed += 1;
    pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) exit(child_status(seed));
    st = wait_exit(pid);
    if (st != child_status(seed)) {
      fprintf(stderr, "stress_fork_exec: forked child returned %d\n", st);
      return 1;
    }
    checksum += (uint64_t)st;

    checksum += work(seed * 3u);
  }
  printf("stress_fork_exec checksum=%llu\n", (unsigned long long)checksum);
  return 0;
}
