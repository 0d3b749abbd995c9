// The code the soft decoder tests decode (see soft_decode_code.h).
#include "soft_decode_code.h"

// wm_fn: one instruction per label, lengths 1 to 11 bytes. Labels are STT_NOTYPE, so only
// wm_fn itself is a function start.
asm(R"(
  .data
  .globl wm_data
wm_data: .quad 0
  .text
  .globl wm_fn, wm_fn_end
  .type wm_fn, @function
  .p2align 6
  .globl wm_pad
wm_pad:
  .fill 64, 1, 0xcc  # inter-function padding, as in real binaries (the heuristic reads it)
wm_fn:
  push %rbx
  .irp n,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30
  .globl wm_i\n
  .endr
wm_i1:  mov (%rax), %rbx
wm_i2:  movabs $0x1122334455667788, %rcx
wm_i3:  mov 0x12345678(%rdi,%rsi,8), %edx
wm_i4:  mov wm_data(%rip), %rax
wm_i5:  mov %fs:0x28, %rax
wm_i6:  add %rbx, (%rax)
wm_i7:  mov %rbx, -8(%rbp)
wm_i8:  lea (%rax,%rcx,4), %rdx
wm_i9:  nopw 0x0(%rax,%rax,1)
wm_i10: prefetcht0 (%rax)
wm_i11: vmovdqu (%rdi), %ymm0
wm_i12: vmovdqu64 %zmm1, 0x40(%rsi){%k1}
wm_i13: movsb
wm_i14: rep stosq
wm_i15: pop %rbx
wm_i16: push (%rax)
wm_i17: mov (%rax), %rax
wm_i18: mov (%rax), %eax
wm_i19: pop %rsp
wm_i20: leave
wm_i21: cmpxchg %rcx, (%rax)
wm_i22: call wm_small
wm_i23: vpgatherdd %ymm2, (%rdi,%ymm1,4), %ymm0
wm_i24: mov %gs:(%rbx), %ecx
wm_i25: cmp %rcx, 8(%rax,%rbx,2)
wm_i26: jmp *(%rax)
wm_i27: rep movsb
wm_i28: push %rax
wm_i29: cmpsb
wm_i30: ret
wm_fn_end:
  .size wm_fn, .-wm_fn

  .globl wm_small, wm_small_mid
  .type wm_small, @function
wm_small:
  mov 8(%rdi), %rax
wm_small_mid:
  ret
  .size wm_small, .-wm_small

  # Code no function symbol covers (like a stripped binary): the backward heuristic's case.
  .globl wm_nosym, wm_nosym_1
wm_nosym:
  mov 0x10(%rdx), %rcx
wm_nosym_1:
  add $1, %rcx
  ret

  # Spins until *rdi != 0; called for real by the signal test.
  .globl wm_spin, wm_spin_load
  .type wm_spin, @function
wm_spin:
  nop
wm_spin_load:
  mov (%rdi), %rax
  test %rax, %rax
  je wm_spin_load
  ret
  .size wm_spin, .-wm_spin

  .globl wm_big
  .type wm_big, @function
wm_big:
  .rept 4000
  nop
  .endr
  ret
  .size wm_big, .-wm_big
)");
