// The soft collector's decoder, finding instructions: decode_previous through this binary's
// symbol tables and the boundary cache, rep string ops in progress, the no-symbol heuristic,
// dlopen, concurrent and full arenas, and real profiling signals.
#include <dlfcn.h>
#include <signal.h>
#include <sys/time.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <thread>
#include <vector>

#include "model/profile.h"
#include "runtime/soft/boundary_cache.h"
#include "soft_decode_code.h"

namespace whymiss::soft::test {
namespace {

using profile::kAccessRead;

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
  // libz is not a dependency of this test; it is loaded already only if this test ran before.
  const bool loaded = dlopen("libz.so.1", RTLD_NOW | RTLD_NOLOAD) != nullptr;
  void* h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) GTEST_SKIP() << "libz.so.1 is not installed";
  const auto* fn = static_cast<const uint8_t*>(dlsym(h, "zlibVersion"));
  ASSERT_NE(fn, nullptr);
  const uint64_t next = u(fn) + detail::length_at(fn, 15);
  Regs r;
  MemAccess m;
  if (!loaded) {
    EXPECT_EQ(decode_previous(next, r.view, &m), DecodeStatus::NoBoundary);
  }
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

// Re-initialises with an arena too small for wm_big, then restores a 1 MiB one.
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
}  // namespace whymiss::soft::test
