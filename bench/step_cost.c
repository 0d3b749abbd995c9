// The machine's floor for soft mode's trace windows: the time of one trap-flag single step with
// a SIGTRAP handler that does nothing but count (the kernel's debug exception, signal delivery
// and sigreturn; in a VM also whatever the hypervisor adds). Soft mode's own handler decodes and
// records on top of this. usage: step_cost [STEPS]
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

static volatile long steps, limit = 200000;

static void on_trap(int sig, siginfo_t* si, void* ctx) {
  (void)sig;
  (void)si;
  ucontext_t* uc = ctx;
  if (++steps >= limit) uc->uc_mcontext.gregs[REG_EFL] &= ~0x100L;  // trap flag off
}

int main(int argc, char** argv) {
  if (argc > 1) limit = atol(argv[1]);
  if (limit < 1) {
    fprintf(stderr, "%s: STEPS must be a positive number\n", argv[0]);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_trap;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGTRAP, &sa, NULL);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  __asm__ volatile("pushf; orq $0x100, (%%rsp); popf" ::: "memory", "cc");
  volatile long x = 0;
  while (steps < limit) x++;
  clock_gettime(CLOCK_MONOTONIC, &b);
  const double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
  printf("%ld steps, %.2f us per step\n", steps, ns / (double)steps / 1000);
  return 0;
}
