// The soft collector's decoder: effective addresses from hand-built register states, on code
// assembled into this test binary (global labels mark instruction boundaries; the functions are
// decoded, never called). decode_previous goes through the real symbol tables of this binary.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <dlfcn.h>
#include <signal.h>
#include <sys/time.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "model/profile.h"
#include "runtime/soft/boundary_cache.h"
#include "runtime/soft/decode.h"

extern "C" {
extern const uint8_t wm_fn[], wm_fn_end[], wm_i1[], wm_i2[], wm_i3[], wm_i4[], wm_i5[], wm_i6[],
    wm_i7[], wm_i8[], wm_i9[], wm_i10[], wm_i11[], wm_i12[], wm_i13[], wm_i14[], wm_i15[],
    wm_i16[], wm_i17[], wm_i18[], wm_i19[], wm_i20[], wm_i21[], wm_i22[], wm_i23[], wm_i24[],
    wm_i25[], wm_i26[], wm_i27[], wm_i28[], wm_i29[], wm_i30[];
void wm_spin(volatile uint64_t* flag);
extern const uint8_t wm_spin_load[];
extern const uint8_t wm_pad[], wm_big[], wm_small[], wm_small_mid[], wm_data[], wm_nosym[], wm_nosym_1[];
}

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

namespace {

using namespace whymiss::soft;
using whymiss::profile::kAccessRead;
using whymiss::profile::kAccessWrite;

uint64_t u(const uint8_t* p) { return reinterpret_cast<uint64_t>(p); }

struct Regs {
  ucontext_t uc{};
  _libc_fpstate fp{};
  RegisterView view;
  Regs() {
    uc.uc_mcontext.fpregs = &fp;
    view.uc = &uc;
  }
  Regs& set(int reg, uint64_t v) {
    uc.uc_mcontext.gregs[reg] = static_cast<greg_t>(v);
    return *this;
  }
};

DecodeStatus at(const uint8_t* ip, const Regs& r, MemAccess* m) { return decode_at(u(ip), r.view, m); }
// The instruction starting at ip has just run and `r` is the state after it.
DecodeStatus after(const uint8_t* ip, const Regs& r, MemAccess* m) {
  return decode_after_bytes(ip, 15, u(ip), r.view, m);
}

class SoftDecode : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(init(1 << 20)); }
};

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

const uint8_t* const kLabels[] = {wm_fn,  wm_i1,  wm_i2,  wm_i3,  wm_i4,  wm_i5,  wm_i6,  wm_i7,
                                  wm_i8,  wm_i9,  wm_i10, wm_i11, wm_i12, wm_i13, wm_i14, wm_i15,
                                  wm_i16, wm_i17, wm_i18, wm_i19, wm_i20, wm_i21, wm_i22, wm_i23,
                                  wm_i24, wm_i25, wm_i26, wm_i27, wm_i28, wm_i29, wm_i30, wm_fn_end};

TEST_F(SoftDecode, DecodePreviousFindsThePrecedingInstruction) {
  Regs r;
  r.set(REG_RSP, 0x7000).set(REG_RAX, 0x9000).set(REG_RCX, 0).set(REG_RDI, 0x4000);
  size_t checked = 0;
  for (size_t i = 1; i < std::size(kLabels); ++i) {
    MemAccess m{};
    const DecodeStatus st = decode_previous(u(kLabels[i]), r.view, &m);
    ASSERT_NE(st, DecodeStatus::BadBytes) << i;
    if (st == DecodeStatus::NoBoundary) continue;  // after call/jmp/ret
    EXPECT_EQ(m.ip, u(kLabels[i - 1])) << i;
    EXPECT_EQ(m.length, kLabels[i] - kLabels[i - 1]) << i;
    ++checked;
  }
  EXPECT_GE(checked, std::size(kLabels) - 4);
  // The register state is the one after the instruction: pop %rbx read rsp - 8.
  MemAccess m;
  ASSERT_EQ(decode_previous(u(wm_i16), r.view, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ip, u(wm_i15));
  EXPECT_EQ(m.ops[0].addr, 0x6ff8u);
  EXPECT_EQ(decode_previous(u(wm_i18), r.view, &m), DecodeStatus::Clobbered);
  // Inside an instruction: not a boundary.
  const uint64_t bad_before = stats().bad_bytes;
  EXPECT_EQ(decode_previous(u(wm_i2) + 3, r.view, &m), DecodeStatus::NoBoundary);
  EXPECT_EQ(stats().bad_bytes, bad_before + 1);
}

TEST_F(SoftDecode, InterruptedRepStringIsAttributedToItself) {
  Regs r;
  r.set(REG_RSI, 0x1100).set(REG_RDI, 0x2200).set(REG_RCX, 7).set(REG_RAX, 0x9000);
  MemAccess m;
  ASSERT_EQ(decode_previous(u(wm_i27), r.view, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ip, u(wm_i27));
  ASSERT_EQ(m.count, 2);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(m.ops[i].addr, m.ops[i].flags == kAccessRead ? 0x1100u : 0x2200u);
  r.set(REG_RCX, 0);  // not running: the jmp before it is the predecessor
  EXPECT_EQ(decode_previous(u(wm_i27), r.view, &m), DecodeStatus::NoBoundary);
  // A completed rep movsb before next_ip: its last byte.
  ASSERT_EQ(decode_previous(u(wm_i28), r.view, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ip, u(wm_i27));
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(m.ops[i].addr, m.ops[i].flags == kAccessRead ? 0x10ffu : 0x21ffu);
}

TEST_F(SoftDecode, SecondLookupOfAFunctionHitsTheCache) {
  Regs r;
  r.set(REG_RDI, 0x100);
  MemAccess m;
  const DecodeStats before = stats();
  ASSERT_EQ(decode_previous(u(wm_small_mid), r.view, &m), DecodeStatus::Ok);
  ASSERT_EQ(decode_previous(u(wm_small_mid), r.view, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ip, u(wm_small));
  EXPECT_EQ(m.ops[0].addr, 0x108u);
  const DecodeStats now = stats();
  EXPECT_GE(now.cache_hits, before.cache_hits + 1);
  EXPECT_LE(now.functions_cached, before.functions_cached + 1);
}

TEST_F(SoftDecode, InstructionLength) {
  EXPECT_EQ(instruction_length(u(wm_i2)), wm_i3 - wm_i2);
  EXPECT_EQ(instruction_length(u(wm_i12)), wm_i13 - wm_i12);
}

TEST(SoftDecodeHeuristic, FindsBoundariesWithoutSymbols) {
  int found = 0, wrong = 0;
  for (size_t i = 1; i < std::size(kLabels); ++i) {
    const unsigned back = detail::heuristic_previous(wm_pad, kLabels[i]);
    if (back == 0) continue;
    ++found;
    wrong += kLabels[i] - back != kLabels[i - 1];
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GE(found, static_cast<int>(std::size(kLabels)) * 3 / 4);
}

TEST_F(SoftDecode, CodeWithoutSymbolUsesTheHeuristic) {
  Regs r;
  r.set(REG_RDX, 0x5000);
  MemAccess m;
  const DecodeStats before = stats();
  ASSERT_EQ(decode_previous(u(wm_nosym_1), r.view, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ip, u(wm_nosym));
  EXPECT_EQ(m.ops[0].addr, 0x5010u);
  EXPECT_EQ(stats().no_symbol, before.no_symbol + 1);
  EXPECT_EQ(stats().heuristic_found, before.heuristic_found + 1);
  EXPECT_EQ(stats().functions_cached, before.functions_cached);  // nothing to cache
}

TEST_F(SoftDecode, RefreshAfterDlopenFindsTheNewModule) {
  void* h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);  // not a dependency of this test
  if (!h) GTEST_SKIP() << "libz.so.1 is not installed";
  const auto* fn = static_cast<const uint8_t*>(dlsym(h, "zlibVersion"));
  ASSERT_NE(fn, nullptr);
  const uint64_t next = u(fn) + detail::length_at(fn, 15);
  Regs r;
  MemAccess m;
  EXPECT_EQ(decode_previous(next, r.view, &m), DecodeStatus::NoBoundary);  // unknown module
  refresh_modules();
  const DecodeStatus st = decode_previous(next, r.view, &m);
  EXPECT_TRUE(st == DecodeStatus::Ok || st == DecodeStatus::NotMemory) << static_cast<int>(st);
  EXPECT_EQ(m.ip, u(fn));  // found through libz's .dynsym
  // The modules known before are still there.
  ASSERT_EQ(decode_previous(u(wm_i16), r.view, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ip, u(wm_i15));
}

TEST_F(SoftDecode, ConcurrentColdLookupsAgree) {
  ASSERT_TRUE(init(1 << 20));  // cold: threads race to cache the same functions
  std::atomic<int> mismatches{0}, go{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      Regs r;
      r.set(REG_RSP, 0x7000).set(REG_RCX, 0);
      while (!go.load()) {}
      for (int round = 0; round < 50; ++round)
        for (size_t i = 1; i < std::size(kLabels); ++i) {
          MemAccess m{};
          if (decode_previous(u(kLabels[i]), r.view, &m) != DecodeStatus::NoBoundary &&
              m.ip != u(kLabels[i - 1]))
            ++mismatches;
        }
    });
  go = 1;
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(stats().functions_cached, 1u);
  EXPECT_EQ(stats().cache_full, 0u);
}

// A real profiling signal: its context's rip is after the instruction that ran, and samples
// attributed to the load in wm_spin must give the flag's address.
struct SpinSamples {
  volatile uint64_t flag = 0;
  std::atomic<int> samples{0}, on_load{0}, wrong_addr{0}, other_ok{0};
};
SpinSamples* g_spin = nullptr;

void on_prof(int, siginfo_t*, void* ctx) {
  const int saved = errno;
  const auto* uc = static_cast<const ucontext_t*>(ctx);
  const uint64_t rip = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
  RegisterView v{uc, 0, 0};
  MemAccess m;
  if (rip >= u(wm_spin_load) && rip <= u(wm_spin_load) + 16) {
    const DecodeStatus st = decode_previous(rip, v, &m);
    if (st == DecodeStatus::Ok && m.ip == u(wm_spin_load)) {
      ++g_spin->on_load;
      if (m.ops[0].addr != reinterpret_cast<uint64_t>(&g_spin->flag)) ++g_spin->wrong_addr;
    } else if (st == DecodeStatus::Ok) {
      ++g_spin->other_ok;  // nothing else in the loop accesses memory
    }
    if (++g_spin->samples >= 40) g_spin->flag = 1;
  }
  errno = saved;
}

TEST_F(SoftDecode, RealProfilingSignalsDecodeInTheHandler) {
  SpinSamples s;
  g_spin = &s;
  struct sigaction sa{}, old{};
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  ASSERT_EQ(sigaction(SIGPROF, &sa, &old), 0);
  itimerval it{{0, 1000}, {0, 1000}}, off{};
  ASSERT_EQ(setitimer(ITIMER_PROF, &it, nullptr), 0);
  wm_spin(&s.flag);  // returns once the handler has seen 40 samples in the loop
  setitimer(ITIMER_PROF, &off, nullptr);
  sigaction(SIGPROF, &old, nullptr);
  EXPECT_GE(s.samples.load(), 40);
  EXPECT_GT(s.on_load.load(), 0);
  EXPECT_EQ(s.wrong_addr.load(), 0);
  EXPECT_EQ(s.other_ok.load(), 0);
  std::printf("samples in loop %d, attributed to the load %d\n", s.samples.load(),
              s.on_load.load());
}

// Runs last in this binary's order: it re-initialises with an arena too small for wm_big.
TEST(SoftDecodeArena, FullArenaFailsAndCountsButKeepsWhatItHas) {
  ASSERT_TRUE(init(4096));
  Regs r;
  r.set(REG_RDI, 0x100);
  MemAccess m;
  ASSERT_EQ(decode_previous(u(wm_small_mid), r.view, &m), DecodeStatus::Ok);
  EXPECT_EQ(stats().functions_cached, 1u);
  EXPECT_EQ(decode_previous(u(wm_big) + 100, r.view, &m), DecodeStatus::NoBoundary);
  EXPECT_EQ(stats().cache_full, 1u);
  EXPECT_EQ(decode_previous(u(wm_big) + 200, r.view, &m), DecodeStatus::NoBoundary);
  EXPECT_EQ(stats().cache_full, 2u);
  ASSERT_EQ(decode_previous(u(wm_i16), r.view, &m), DecodeStatus::Ok);  // still room for wm_fn
  EXPECT_EQ(m.ip, u(wm_i15));
  EXPECT_EQ(stats().functions_cached, 2u);
  ASSERT_EQ(decode_previous(u(wm_small_mid), r.view, &m), DecodeStatus::Ok);
  EXPECT_EQ(m.ip, u(wm_small));
  EXPECT_EQ(stats().cache_hits, 1u);
  // With room, the same function decodes.
  ASSERT_TRUE(init(1 << 20));
  ASSERT_EQ(decode_previous(u(wm_big) + 100, r.view, &m), DecodeStatus::NotMemory);
  EXPECT_EQ(m.ip, u(wm_big) + 99);
}

}  // namespace
