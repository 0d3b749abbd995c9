// The machine's floor for soft mode's trace windows: the time of one trap-flag single step and
// of one int3 breakpoint trap, each with a SIGTRAP handler that does nothing but count (the
// kernel's exception, signal delivery and sigreturn; in a VM also whatever the hypervisor adds:
// hypervisors commonly intercept the debug exception of a single step, not the breakpoint's).
// Soft mode's own handler decodes and records on top of this; its runs (trace.h) take one int3
// trap per stretch of straight-line code instead of a single step per instruction.
// usage: step_cost [TRAPS]      build: gcc -O2 bench/step_cost.c -o step_cost
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

static volatile long traps, limit = 200000;

static void on_trap(int sig, siginfo_t* si, void* ctx) {
  (void)sig;
  (void)si;
  ucontext_t* uc = ctx;
  if (++traps >= limit) uc->uc_mcontext.gregs[REG_EFL] &= ~0x100L;  // trap flag off
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc > 1) limit = atol(argv[1]);
  if (limit < 1) {
    fprintf(stderr, "%s: TRAPS must be a positive number\n", argv[0]);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_trap;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGTRAP, &sa, NULL);
  double a = now_ns();
  __asm__ volatile("pushf; orq $0x100, (%%rsp); popf" ::: "memory", "cc");
  volatile long x = 0;
  while (traps < limit) x++;
  const double step = (now_ns() - a) / (double)traps;
  traps = 0;
  a = now_ns();
  for (long i = 0; i < limit; ++i) __asm__ volatile("int3" ::: "memory");
  const double int3 = (now_ns() - a) / (double)traps;
  printf("%ld steps, %.2f us per step; %ld int3 traps, %.2f us per trap\n", limit, step / 1000,
         (long)traps, int3 / 1000);
  return 0;
}
