// Code the capture stage tests put breakpoints on (see soft_capture_code.h). Real functions
// (typed and sized symbols), so the decoder finds their instruction boundaries.
#include "soft_capture_code.h"

asm(R"(
  .text
  .globl wmc_walk, wmc_walk_load
  .type wmc_walk, @function
  .p2align 4
# uint64_t wmc_walk(const void* base, uint64_t n, uint64_t stride): loads the 8-byte words at
# base + i*stride for i < n, in order, and returns their sum.
wmc_walk:
  xor %eax, %eax
  test %rsi, %rsi
  je 2f
1:
wmc_walk_load:
  add (%rdi), %rax
  add %rdx, %rdi
  dec %rsi
  jne 1b
2:
  ret
  .size wmc_walk, .-wmc_walk

  .globl wmc_store, wmc_store_op
  .type wmc_store, @function
  .p2align 4
# void wmc_store(uint64_t* p, uint64_t n): stores n, n-1, ..., 1 to *p.
wmc_store:
  test %rsi, %rsi
  je 2f
1:
wmc_store_op:
  mov %rsi, (%rdi)
  dec %rsi
  jne 1b
2:
  ret
  .size wmc_store, .-wmc_store

  .globl wmc_never, wmc_n1, wmc_n2, wmc_n3, wmc_n4, wmc_n5
  .type wmc_never, @function
  .p2align 4
# Never called: distinct memory instructions to hang windows on.
wmc_never:
wmc_n1: mov (%rdi), %rax
wmc_n2: mov 8(%rdi), %rax
wmc_n3: mov 16(%rdi), %rax
wmc_n4: mov 24(%rdi), %rax
wmc_n5: mov 32(%rdi), %rax
  ret
  .size wmc_never, .-wmc_never
)");
