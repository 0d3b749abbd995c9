// The soft collector's decoder, one instruction at a time: effective addresses, sizes and
// read/write flags before execution (breakpoints, decode_at) and after it (samples: register
// undo and clobber detection), from hand-built register states on the code in soft_decode_code.
#include <initializer_list>
#include <vector>

#include "model/profile.h"
#include "soft_decode_code.h"

namespace whymiss::soft::test {
namespace {

using profile::kAccessRead;
using profile::kAccessWrite;

TEST_F(SoftDecode, BaseIndexScaleDisplacement) {
  Regs r;
  r.set(REG_RDI, 0x100000).set(REG_RSI, 3);
  MemAccess m;
  ASSERT_EQ(at(wm_i3, r, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ip, u(wm_i3));
  EXPECT_EQ(m.length, wm_i4 - wm_i3);
  ASSERT_EQ(m.count, 1);
  EXPECT_EQ(m.ops[0].addr, 0x100000u + 3 * 8 + 0x12345678);
  EXPECT_EQ(m.ops[0].size, 4);
  EXPECT_EQ(m.ops[0].flags, kAccessRead);

  r.set(REG_RAX, 0x5000).set(REG_RBX, 0x30);  // cmp %rcx, 8(%rax,%rbx,2)
  ASSERT_EQ(at(wm_i25, r, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ops[0].addr, 0x5000u + 0x60 + 8);
  EXPECT_EQ(m.ops[0].size, 8);
}

TEST_F(SoftDecode, RipRelativeIsFromTheEndOfTheInstruction) {
  Regs r;
  MemAccess m;
  ASSERT_EQ(at(wm_i4, r, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ops[0].addr, u(wm_data));
  EXPECT_EQ(m.ops[0].size, 8);
}

TEST_F(SoftDecode, FsAndGsAddTheThreadBases) {
  Regs r;
  r.view.fs_base = 0x7f0000001000;
  r.view.gs_base = 0x6000;
  r.set(REG_RBX, 0x24);
  MemAccess m;
  ASSERT_EQ(at(wm_i5, r, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ops[0].addr, 0x7f0000001000u + 0x28);
  ASSERT_EQ(at(wm_i24, r, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ops[0].addr, 0x6000u + 0x24);
  EXPECT_EQ(m.ops[0].size, 4);
}

TEST_F(SoftDecode, StackOperandsBeforeExecution) {
  Regs r;
  r.set(REG_RSP, 0x7000).set(REG_RAX, 0x9000).set(REG_RBP, 0x7100);
  MemAccess m;
  ASSERT_EQ(at(wm_fn, r, &m), DecodeStatus::Ok);  // push %rbx
  ASSERT_EQ(m.count, 1);
  EXPECT_EQ(m.ops[0].addr, 0x6ff8u);
  EXPECT_EQ(m.ops[0].size, 8);
  EXPECT_EQ(m.ops[0].flags, kAccessWrite);
  ASSERT_EQ(at(wm_i15, r, &m), DecodeStatus::Ok);  // pop %rbx
  EXPECT_EQ(m.ops[0].addr, 0x7000u);
  EXPECT_EQ(m.ops[0].flags, kAccessRead);
  ASSERT_EQ(at(wm_i22, r, &m), DecodeStatus::Ok);  // call
  EXPECT_EQ(m.ops[0].addr, 0x6ff8u);
  EXPECT_EQ(m.ops[0].flags, kAccessWrite);
  ASSERT_EQ(at(wm_i30, r, &m), DecodeStatus::Ok);  // ret
  EXPECT_EQ(m.ops[0].addr, 0x7000u);
  EXPECT_EQ(m.ops[0].flags, kAccessRead);
  ASSERT_EQ(at(wm_i20, r, &m), DecodeStatus::Ok);  // leave reads [rbp]
  EXPECT_EQ(m.ops[0].addr, 0x7100u);
  ASSERT_EQ(at(wm_i16, r, &m), DecodeStatus::Ok);  // push (%rax): both accesses
  ASSERT_EQ(m.count, 2);
  EXPECT_EQ(m.ops[0].addr, 0x9000u);
  EXPECT_EQ(m.ops[0].flags, kAccessRead);
  EXPECT_EQ(m.ops[1].addr, 0x6ff8u);
  EXPECT_EQ(m.ops[1].flags, kAccessWrite);
  ASSERT_EQ(at(wm_i26, r, &m), DecodeStatus::Ok);  // jmp *(%rax) reads its target
  EXPECT_EQ(m.ops[0].addr, 0x9000u);
}

TEST_F(SoftDecode, StringOperations) {
  Regs r;
  r.set(REG_RSI, 0x1000).set(REG_RDI, 0x2000).set(REG_RCX, 0);
  MemAccess m;
  ASSERT_EQ(at(wm_i13, r, &m), DecodeStatus::Ok);  // movsb
  ASSERT_EQ(m.count, 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(m.ops[i].size, 1);
    if (m.ops[i].flags == kAccessRead) EXPECT_EQ(m.ops[i].addr, 0x1000u);
    else EXPECT_EQ(m.ops[i].addr, 0x2000u);
  }
  EXPECT_NE(m.ops[0].flags, m.ops[1].flags);
  EXPECT_EQ(at(wm_i14, r, &m), DecodeStatus::NotMemory);  // rep stosq with rcx == 0
  r.set(REG_RCX, 5);
  ASSERT_EQ(at(wm_i14, r, &m), DecodeStatus::Ok);
  ASSERT_EQ(m.count, 1);
  EXPECT_EQ(m.ops[0].addr, 0x2000u);
  EXPECT_EQ(m.ops[0].size, 8);
  EXPECT_EQ(m.ops[0].flags, kAccessWrite);
  ASSERT_EQ(at(wm_i29, r, &m), DecodeStatus::Ok);  // cmpsb reads both
  ASSERT_EQ(m.count, 2);
  EXPECT_EQ(m.ops[0].flags | m.ops[1].flags, kAccessRead);
}

TEST_F(SoftDecode, VectorAccessesHaveTheirWidth) {
  Regs r;
  r.set(REG_RDI, 0x4000).set(REG_RSI, 0x8000);
  MemAccess m;
  ASSERT_EQ(at(wm_i11, r, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ops[0].addr, 0x4000u);
  EXPECT_EQ(m.ops[0].size, 32);
  EXPECT_EQ(m.ops[0].flags, kAccessRead);
  ASSERT_EQ(at(wm_i12, r, &m), DecodeStatus::Ok);  // masked store: full width (approximation)
  EXPECT_EQ(m.ops[0].addr, 0x8040u);
  EXPECT_EQ(m.ops[0].size, 64);
  EXPECT_EQ(m.ops[0].flags & kAccessWrite, kAccessWrite);
}

TEST_F(SoftDecode, GatherReportsItsFirstElement) {
  Regs r;
  r.set(REG_RDI, 0x4000);
  r.fp._xmm[1].element[0] = static_cast<uint32_t>(-3);  // lane 0 of ymm1, sign-extended
  MemAccess m;
  ASSERT_EQ(at(wm_i23, r, &m), DecodeStatus::Ok);
  ASSERT_EQ(m.count, 1);
  EXPECT_EQ(m.ops[0].addr, 0x4000u - 12);
  EXPECT_EQ(m.ops[0].size, 4);
  r.uc.uc_mcontext.fpregs = nullptr;  // no vector state: cannot evaluate
  EXPECT_EQ(at(wm_i23, r, &m), DecodeStatus::BadBytes);
}

TEST_F(SoftDecode, ReadWriteFlagsFollowOperandActions) {
  Regs r;
  r.set(REG_RAX, 0x3000).set(REG_RBP, 0x7000);
  MemAccess m;
  ASSERT_EQ(at(wm_i6, r, &m), DecodeStatus::Ok);  // add %rbx,(%rax)
  EXPECT_EQ(m.ops[0].flags, kAccessRead | kAccessWrite);
  ASSERT_EQ(at(wm_i7, r, &m), DecodeStatus::Ok);  // mov %rbx,-8(%rbp)
  EXPECT_EQ(m.ops[0].flags, kAccessWrite);
  EXPECT_EQ(m.ops[0].addr, 0x6ff8u);
  ASSERT_EQ(at(wm_i21, r, &m), DecodeStatus::Ok);  // cmpxchg: read, conditional write
  EXPECT_EQ(m.ops[0].flags, kAccessRead | kAccessWrite);
}

TEST_F(SoftDecode, LeaNopAndPrefetchAreNotMemory) {
  Regs r;
  MemAccess m;
  EXPECT_EQ(at(wm_i8, r, &m), DecodeStatus::NotMemory);
  EXPECT_EQ(at(wm_i9, r, &m), DecodeStatus::NotMemory);
  EXPECT_EQ(at(wm_i10, r, &m), DecodeStatus::NotMemory);
  EXPECT_EQ(at(wm_i2, r, &m), DecodeStatus::NotMemory);
  const uint8_t garbage[15] = {0x0f, 0x0b + 0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};  // 0f 3b: none
  EXPECT_EQ(decode_bytes(garbage, sizeof garbage, 0x1000, r.view, &m), DecodeStatus::BadBytes);
}

TEST_F(SoftDecode, AfterExecutionUndoesStackAndStringUpdates) {
  Regs r;
  r.set(REG_RSP, 0x7000).set(REG_RSI, 0x1001).set(REG_RDI, 0x2001).set(REG_RAX, 0x9000);
  MemAccess m;
  ASSERT_EQ(after(wm_fn, r, &m), DecodeStatus::Ok);  // push %rbx: wrote the new top
  EXPECT_EQ(m.ops[0].addr, 0x7000u);
  ASSERT_EQ(after(wm_i15, r, &m), DecodeStatus::Ok);  // pop %rbx: read the old top
  EXPECT_EQ(m.ops[0].addr, 0x6ff8u);
  ASSERT_EQ(after(wm_i16, r, &m), DecodeStatus::Ok);  // push (%rax)
  EXPECT_EQ(m.ops[0].addr, 0x9000u);
  EXPECT_EQ(m.ops[1].addr, 0x7000u);
  ASSERT_EQ(after(wm_i20, r, &m), DecodeStatus::Ok);  // leave: rsp = old rbp + 8
  EXPECT_EQ(m.ops[0].addr, 0x6ff8u);
  ASSERT_EQ(after(wm_i13, r, &m), DecodeStatus::Ok);  // movsb, DF clear: moved forward by 1
  for (int i = 0; i < m.count; ++i)
    EXPECT_EQ(m.ops[i].addr, m.ops[i].flags == kAccessRead ? 0x1000u : 0x2000u);
  r.set(REG_EFL, 1u << 10);  // DF set: moved backwards
  ASSERT_EQ(after(wm_i13, r, &m), DecodeStatus::Ok);
  for (int i = 0; i < m.count; ++i)
    EXPECT_EQ(m.ops[i].addr, m.ops[i].flags == kAccessRead ? 0x1002u : 0x2002u);
  r.set(REG_EFL, 0).set(REG_RDI, 0x2040).set(REG_RCX, 0);  // rep stosq done: last element
  ASSERT_EQ(after(wm_i14, r, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ops[0].addr, 0x2038u);
}

TEST_F(SoftDecode, AfterExecutionDetectsClobberedAddressRegisters) {
  Regs r;
  r.set(REG_RSP, 0x7000).set(REG_RAX, 0x9000);
  MemAccess m;
  EXPECT_EQ(after(wm_i17, r, &m), DecodeStatus::Clobbered);  // mov (%rax),%rax
  EXPECT_EQ(after(wm_i18, r, &m), DecodeStatus::Clobbered);  // mov (%rax),%eax
  EXPECT_EQ(after(wm_i19, r, &m), DecodeStatus::Clobbered);  // pop %rsp
  EXPECT_EQ(after(wm_i21, r, &m), DecodeStatus::Clobbered);  // cmpxchg may rewrite rax
  ASSERT_EQ(after(wm_i1, r, &m), DecodeStatus::Ok);          // mov (%rax),%rbx keeps rax
  EXPECT_EQ(m.ops[0].addr, 0x9000u);
  EXPECT_EQ(after(wm_i22, r, &m), DecodeStatus::NoBoundary);  // call: next ran elsewhere
  EXPECT_EQ(after(wm_i26, r, &m), DecodeStatus::NoBoundary);  // jmp
  EXPECT_EQ(after(wm_i30, r, &m), DecodeStatus::NoBoundary);  // ret
}

}  // namespace
}  // namespace whymiss::soft::test

namespace whymiss::soft::test {
namespace {

RunInfo step_info(std::initializer_list<uint8_t> bytes, uint64_t ip = 0x400000) {
  const std::vector<uint8_t> code(bytes);
  Regs r;
  MemAccess m;
  RunInfo run;
  decode_step(code.data(), code.size(), ip, r.view, &m, &run);
  return run;
}

constexpr uint32_t bit(int gpr) { return 1u << gpr; }  // Zydis GPR64 ids: rax 0, rcx 1, ... rsp 4
constexpr int kRax = 0, kRcx = 1, kRdx = 2, kRsp = 4, kRsi = 6, kRdi = 7;

// Trace runs (trace.h) trust these roles: a transfer taken by the handler must be exactly what
// the CPU would do, and a plain instruction must fall through with no rip dependence.
TEST(SoftDecodeRuns, TransfersTheHandlerMayTakeAndTheirTargets) {
  RunInfo r = step_info({0x75, 0x10});  // jnz +0x10
  EXPECT_EQ(r.role, kRunBranch);
  EXPECT_EQ(r.cond, 5);
  EXPECT_EQ(r.target, 0x400012u);
  r = step_info({0x0f, 0x8c, 0x00, 0x01, 0x00, 0x00});  // jl rel32 +0x100
  EXPECT_EQ(r.role, kRunBranch);
  EXPECT_EQ(r.cond, 12);
  EXPECT_EQ(r.target, 0x400106u);
  r = step_info({0xeb, 0xfe});  // jmp $
  EXPECT_EQ(r.role, kRunBranch);
  EXPECT_EQ(r.cond, 16);
  EXPECT_EQ(r.target, 0x400000u);
  r = step_info({0xe8, 0x00, 0x10, 0x00, 0x00});  // call rel32
  EXPECT_EQ(r.role, kRunCall);
  EXPECT_EQ(r.target, 0x401005u);
  r = step_info({0x66, 0x66, 0x48, 0xe8, 0x00, 0x10, 0x00, 0x00});  // the TLS call: REX.W wins
  EXPECT_EQ(r.role, kRunCall);
  EXPECT_EQ(r.target, 0x401008u);
  EXPECT_EQ(step_info({0xc3}).role, kRunRet);
  r = step_info({0xc2, 0x10, 0x00});  // ret 16
  EXPECT_EQ(r.role, kRunRet);
  EXPECT_EQ(r.pop, 16);
}

TEST(SoftDecodeRuns, WhatMustBeSingleStepped) {
  EXPECT_EQ(step_info({0x48, 0xcb}).role, kRunStop);              // lretq (far)
  EXPECT_EQ(step_info({0xcb}).role, kRunStop);                    // lret
  EXPECT_EQ(step_info({0xe3, 0x05}).role, kRunStop);              // jrcxz
  EXPECT_EQ(step_info({0xe2, 0xfe}).role, kRunStop);              // loop
  EXPECT_EQ(step_info({0xff, 0xe0}).role, kRunStop);              // jmp *%rax
  EXPECT_EQ(step_info({0xff, 0xd0}).role, kRunStop);              // call *%rax
  EXPECT_EQ(step_info({0xff, 0x25, 0, 0, 0, 0}).role, kRunStop);  // jmp *0(%rip)
  EXPECT_EQ(step_info({0x0f, 0x05}).role, kRunStop);              // syscall
  EXPECT_EQ(step_info({0xf3, 0xa4}).role, kRunStop);              // rep movsb
  EXPECT_EQ(step_info({0x9c}).role, kRunStop);                    // pushf
  EXPECT_EQ(step_info({0xcc}).role, kRunStop);                    // int3
  EXPECT_EQ(step_info({0x0f, 0x0b}).role, kRunStop);              // ud2
  EXPECT_EQ(step_info({0xf3, 0x48, 0x0f, 0xae, 0xd0}).role, kRunStop);  // wrfsbase %rax
  EXPECT_EQ(step_info({0x67, 0x8b, 0x00}).role, kRunStop);        // mov (%eax),%eax: 32-bit address
  // 66h on near transfers: Intel ignores it, AMD makes rip (and the stack slot) 16 bits.
  EXPECT_EQ(step_info({0x66, 0xe9, 0x10, 0x00, 0x00, 0x00}).role, kRunStop);  // jmp
  EXPECT_EQ(step_info({0x66, 0xc3}).role, kRunStop);                          // ret
  EXPECT_EQ(step_info({0x66, 0x75, 0x10}).role, kRunStop);                    // jnz
}

TEST(SoftDecodeRuns, PlainInstructionsTheirAddressAndWrittenRegisters) {
  RunInfo r = step_info({0x48, 0x8b, 0x14, 0xc8});  // mov (%rax,%rcx,8),%rdx
  EXPECT_EQ(r.role, kRunPlain);
  EXPECT_EQ(r.address_regs, bit(kRax) | bit(kRcx));
  EXPECT_EQ(r.written_regs, bit(kRdx));
  EXPECT_FALSE(r.rip_relative);
  r = step_info({0x48, 0x8b, 0x00});  // mov (%rax),%rax: the address register is written
  EXPECT_EQ(r.address_regs, bit(kRax));
  EXPECT_EQ(r.written_regs, bit(kRax));
  r = step_info({0x8b, 0x05, 0x10, 0, 0, 0});  // mov 0x10(%rip),%eax
  EXPECT_EQ(r.role, kRunPlain);
  EXPECT_TRUE(r.rip_relative);
  EXPECT_EQ(r.address_regs, 0u);
  r = step_info({0x48, 0x8d, 0x05, 0x10, 0, 0, 0});  // lea 0x10(%rip),%rax: rip's value, no access
  EXPECT_TRUE(r.rip_relative);
  EXPECT_EQ(r.address_regs, 0u);
  r = step_info({0x50});  // push %rax: an unrecorded stack slot, so no address register
  EXPECT_EQ(r.role, kRunPlain);
  EXPECT_EQ(r.address_regs, 0u);
  EXPECT_EQ(r.written_regs, bit(kRsp));
  r = step_info({0xa4});  // movsb (no rep): rsi and rdi, both moved
  EXPECT_EQ(r.role, kRunPlain);
  EXPECT_EQ(r.address_regs, bit(kRsi) | bit(kRdi));
  EXPECT_EQ(r.written_regs & (bit(kRsi) | bit(kRdi)), bit(kRsi) | bit(kRdi));
  r = step_info({0x0f, 0xa2});  // cpuid writes eax, ebx, ecx, edx
  EXPECT_EQ(r.written_regs, bit(kRax) | bit(3) | bit(kRcx) | bit(kRdx));
}

TEST(SoftDecodeRuns, BranchConditionsFollowTheFlags) {
  constexpr uint64_t CF = 1, ZF = 1 << 6, SF = 1 << 7, OF = 1 << 11;
  EXPECT_TRUE(branch_taken(4, ZF));        // jz
  EXPECT_FALSE(branch_taken(5, ZF));       // jnz
  EXPECT_TRUE(branch_taken(2, CF));        // jb
  EXPECT_TRUE(branch_taken(6, ZF));        // jbe
  EXPECT_FALSE(branch_taken(7, CF));       // ja
  EXPECT_TRUE(branch_taken(12, SF));       // jl: SF != OF
  EXPECT_FALSE(branch_taken(12, SF | OF));
  EXPECT_TRUE(branch_taken(13, SF | OF));  // jge
  EXPECT_TRUE(branch_taken(14, ZF | SF | OF));  // jle: ZF
  EXPECT_FALSE(branch_taken(15, ZF));      // jg
  EXPECT_TRUE(branch_taken(15, 0));
  EXPECT_TRUE(branch_taken(16, 0));        // jmp
}

}  // namespace
}  // namespace whymiss::soft::test
