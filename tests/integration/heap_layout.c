// Prints where the C allocator puts a fixed sequence of blocks, so that a run under whymiss can be
// compared with a native run (tests/integration/heap_layout.py). Every line but the last is what
// must not change: heap blocks as offsets from the kernel's start of the brk heap, the block a
// second thread gets in its own arena as its offset in that arena's 64 MiB-aligned heap, and
// mmap'ed blocks by their offset in the page (their pages follow the libraries loaded, which the
// runtime adds to). The last line has the absolute addresses, to compare where ASLR is off.
// Addresses are recorded first and printed at the end, so stdio's buffer is not among them.
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The kernel's start of the brk heap (/proc/self/stat field 47), read without allocating.
static uintptr_t start_brk(void) {
  char buf[4096];
  int fd = open("/proc/self/stat", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char* p = strrchr(buf, ')');  // the command name may contain spaces
  if (!p) return 0;
  int field = 2;
  for (; *p && field < 47; p++)
    if (*p == ' ') field++;
  return (uintptr_t)strtoull(p, 0, 10);
}

static void* thread_block;
static void* thread_body(void* arg) {
  (void)arg;
  thread_block = malloc(100);
  return 0;
}

int main(void) {
  // Sizes below and above glibc's mmap threshold (128 KiB); every third block calloc'ed.
  static const size_t sizes[] = {24, 1, 100, 4000, 64, 1000000, 72, 256, 8, 200000,
                                 33, 4096, 130000, 16, 500, 3000000, 48, 1024, 7, 65536};
  enum { N = sizeof sizes / sizeof sizes[0], M = N + 6 };
  void* p[M];
  for (int i = 0; i < N; i++) p[i] = (i % 3 == 1) ? calloc(1, sizes[i]) : malloc(sizes[i]);
  free(p[2]);
  free(p[4]);
  p[N] = malloc(90);               // reuses a freed block
  p[N + 1] = realloc(p[8], 5000);  // moves
  // A second thread: glibc puts its thread control block (DTV) on this heap, and the thread's
  // own blocks in a new arena.
  pthread_t t;
  if (pthread_create(&t, 0, thread_body, 0) != 0 || pthread_join(t, 0) != 0) return 1;
  p[N + 2] = thread_block;
  p[N + 3] = malloc(40);
  p[N + 4] = calloc(4, 48);
  p[N + 5] = malloc(64);
  const uintptr_t b = start_brk(), end = (uintptr_t)sbrk(0);
  for (int i = 0; i < M; i++) {
    const uintptr_t a = (uintptr_t)p[i];
    if (a >= b && a < end)
      printf("%2d brk+%#lx\n", i, (unsigned long)(a - b));
    else if (i == N + 2)
      printf("%2d arena+%#lx\n", i, (unsigned long)(a & ((1ul << 26) - 1)));
    else
      printf("%2d mmap page+%#lx\n", i, (unsigned long)(a & 4095));
  }
  printf("absolute brk=%#lx", (unsigned long)b);
  for (int i = 0; i < M; i++) printf(" %p", p[i]);
  printf("\n");
  return 0;
}
