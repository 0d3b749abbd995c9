// The capture stage's Int3 backend, for real: software breakpoints (0xCC patched over the first
// byte of the window's instruction) trap on every x86-64 Linux, VMs included, so nothing here is
// emulated. A separate binary from soft_capture_test because that one's trap emulation owns
// SIGTRAP, which this backend needs at its default disposition. Synchronisation is by latches
// and joins, never by sleeping; no timing is asserted (the cost test only prints).
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <latch>
#include <thread>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/estimate.h"
#include "model/geometry.h"
#include "runtime/soft/capture.h"
#include "runtime/soft/capture_internal.h"
#include "runtime/soft/decode.h"
#include "soft_capture_code.h"
#include "soft_capture_helpers.h"

namespace whymiss::soft {
namespace {

namespace cap = capture;

pid_t tid() { return pid_t(syscall(SYS_gettid)); }
using namespace capture_test;  // now, u, sample, windows, captures

// The code bytes of the instruction as the assembler left them (read before any arming).
struct Bytes {
  uint8_t b[8];
  explicit Bytes(const void* ip) { std::memcpy(b, ip, sizeof b); }
  bool same_as(const void* ip) const { return std::memcmp(b, ip, sizeof b) == 0; }
};
const Bytes& walk_bytes() {
  static const Bytes b(wmc_walk_load);
  return b;
}
uint8_t first_byte(const void* ip) { return *static_cast<const volatile uint8_t*>(ip); }

// The protection of the page holding ip, from /proc/self/maps ("r-x" expected outside windows).
std::string page_perms(const void* ip) {
  FILE* f = std::fopen("/proc/self/maps", "r");
  char line[512];
  std::string r;
  while (f && std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && u(ip) >= lo && u(ip) < hi) r = perms;
  }
  if (f) std::fclose(f);
  return r.substr(0, 3);
}

class SoftCaptureInt3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    (void)walk_bytes();
    ASSERT_TRUE(init(1 << 20));
    struct sigaction old;
    ASSERT_EQ(sigaction(SIGTRAP, nullptr, &old), 0);
    // Default, or the stage's own handler from an earlier run of the suite (--gtest_repeat).
    ASSERT_TRUE(old.sa_handler == SIG_DFL ||
                ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == cap::detail::int3_on_sigtrap));
  }
  static cap::Config config() {
    cap::Config c;
    c.signo = SIGRTMIN + 5;
    c.max_threads = 64;
    c.captures_per_window = 16;
    c.window_ns = 60'000'000'000ull;
    c.max_windows = 64;
    c.max_captures = 1 << 16;
    c.probe = false;
    c.force_int3 = true;  // the backend under test, whatever the machine's debug registers do
    return c;
  }
  void SetUp() override { perms_ = page_perms(wmc_walk_load); }
  void TearDown() override {
    cap::stop();
    EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load)) << "an int3 left behind";
    EXPECT_EQ(page_perms(wmc_walk_load), perms_);
  }
  std::string perms_;
};

// The collector (this thread) arms a window; the worker's loop is captured exactly, in order,
// up to the bound; the int3 is there while the window is open and gone once it is full, ended,
// stopped; the page's protection is back.
TEST_F(SoftCaptureInt3, HotInstructionCapturesTheLoopsAddressesInAnotherThread) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  EXPECT_EQ(cap::backend(), profile::CaptureBackend::Int3);
  static uint64_t buf[64 * 8];
  std::latch tracked(1), armed(1);
  uint64_t sum = 1;
  std::thread worker([&] {
    ASSERT_EQ(cap::add_thread(tid(), 1), 0);
    tracked.count_down();
    armed.wait();
    sum = wmc_walk(buf, 40, 64);  // 40 executions; the window takes 16
    cap::remove_thread(tid());
  });
  tracked.wait();
  sample(wmc_walk_load, u(buf), 1, profile::kAccessRead, 4);
  const uint64_t t0 = now();
  cap::tick(t0);
  ASSERT_EQ(cap::stats().windows, 1u) << "first errno " << cap::stats().first_errno;
  EXPECT_EQ(first_byte(wmc_walk_load), 0xCC);
  EXPECT_EQ(page_perms(wmc_walk_load).substr(0, 2), "rw");
  uint8_t orig[16];
  ASSERT_EQ(cap::original_code(u(wmc_walk_load), orig, sizeof orig), 3u);  // add (%rdi),%rax
  EXPECT_EQ(std::memcmp(orig, walk_bytes().b, 3), 0);
  EXPECT_EQ(cap::original_code(u(wmc_walk_load) + 3, orig, sizeof orig), 0u);
  armed.count_down();
  worker.join();
  EXPECT_EQ(sum, 0u);  // the loop ran correctly through its breakpoint
  // Full (16 hits, one thread): the int3 was not re-inserted after the 16th.
  EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  cap::tick(now());  // ends the window
  EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  EXPECT_EQ(page_perms(wmc_walk_load), perms_);
  cap::stop();

  const auto w = windows();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].ip, u(wmc_walk_load));
  EXPECT_EQ(w[0].captures, 16u);
  EXPECT_EQ(w[0].dropped, 0u);
  const auto c = captures();
  ASSERT_EQ(c.size(), 16u);
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].addr, u(buf) + 64 * i) << i;
    EXPECT_EQ(c[i].ip, u(wmc_walk_load));
    EXPECT_EQ(c[i].thread, 1u);
    EXPECT_EQ(c[i].window, 0u);
    EXPECT_EQ(c[i].size, 8u);
    EXPECT_EQ(c[i].flags, profile::kAccessRead);
  }
  const cap::Stats s = cap::stats();
  EXPECT_EQ(s.captures, 16u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(s.open_failures, 0u);
  EXPECT_EQ(s.int3_bounces, 0u);
}

// The default configuration probes: where debug registers fire it keeps them, where they do not
// (this VM) it falls back to Int3 instead of returning ENODEV.
TEST_F(SoftCaptureInt3, DefaultConfigFallsBackToInt3WhereDebugRegistersDoNotFire) {
  cap::Config c = config();
  c.probe = true;
  c.force_int3 = false;
  ASSERT_EQ(cap::init(c, nullptr), 0);
  const auto be = cap::backend();
  EXPECT_TRUE(be == profile::CaptureBackend::HwBreakpoint || be == profile::CaptureBackend::Int3);
  std::fprintf(stderr, "backend on this machine: %s\n",
               be == profile::CaptureBackend::Int3 ? "Int3 (debug registers do not fire)" : "HwBreakpoint");
  c.allow_int3 = false;
  const int err = cap::init(c, nullptr);
  if (be == profile::CaptureBackend::Int3) {
    EXPECT_EQ(err, ENODEV);
    EXPECT_EQ(cap::backend(), profile::CaptureBackend::None);
  } else {
    EXPECT_EQ(err, 0);
  }
}

// A window nobody runs: stop() takes the int3 out (checked in TearDown too).
TEST_F(SoftCaptureInt3, StopRestoresTheCodeOfAnOpenWindow) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  ASSERT_EQ(cap::add_thread(tid(), 0), 0);
  static uint64_t buf[64];
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  cap::tick(now());
  ASSERT_EQ(cap::stats().windows, 1u);
  EXPECT_EQ(first_byte(wmc_walk_load), 0xCC);
  cap::stop();
  EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  EXPECT_EQ(page_perms(wmc_walk_load), perms_);
  wmc_walk(buf, 8, 8);  // runs untrapped
  EXPECT_EQ(cap::capture_count(), 0u);
  cap::remove_thread(tid());
}

// The window's stores of a tracked writer: a write captured with its exact address; an
// instruction that is not a memory access is refused (rejected) and never patched.
TEST_F(SoftCaptureInt3, WritesAreCapturedAndNonMemoryInstructionsRejected) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  ASSERT_EQ(cap::add_thread(tid(), 0), 0);
  static uint64_t word;
  const auto* not_memory = wmc_walk_load + 3;  // add %rdx, %rdi
  const Bytes before(not_memory);
  sample(not_memory, 0, 0, profile::kAccessRead, 8);
  cap::tick(now());
  EXPECT_EQ(cap::stats().windows, 0u);
  EXPECT_EQ(cap::stats().rejected, 1u);
  EXPECT_TRUE(before.same_as(not_memory));
  sample(wmc_store_op, u(&word), 0, profile::kAccessWrite, 4);
  cap::tick(now());
  ASSERT_EQ(cap::stats().windows, 1u);
  wmc_store(&word, 5);
  EXPECT_EQ(word, 1u);
  cap::stop();
  const auto c = captures();
  ASSERT_EQ(c.size(), 5u);
  for (const auto& r : c) {
    EXPECT_EQ(r.addr, u(&word));
    EXPECT_EQ(r.flags, profile::kAccessWrite);
  }
  cap::remove_thread(tid());
}

// Two threads run the armed instruction at the same time, many times: no crash, the loops'
// results are right, every capture decodes to an address its thread's loop accessed, in that
// thread's order; bounces (a stepping thread meeting the other's re-inserted int3) are handled.
TEST_F(SoftCaptureInt3, TwoThreadsOnOneBreakpointConcurrently) {
  for (int round = 0; round < 3; ++round) {
    cap::Config c = config();
    c.captures_per_window = 100000;
    ASSERT_EQ(cap::init(c, nullptr), 0);
    constexpr uint64_t kN = 3000;
    static uint64_t bufs[2][kN];
    for (uint64_t i = 0; i < kN; ++i) bufs[0][i] = bufs[1][i] = 1;
    std::latch tracked(2), go(1);
    uint64_t sums[2] = {};
    auto body = [&](uint32_t index) {
      ASSERT_EQ(cap::add_thread(tid(), index), 0);
      tracked.count_down();
      go.wait();
      // One execution per call, yielding now and then: on a busy machine a thread is often
      // preempted on its way back from the int3 (the byte is the original then), and the other
      // one would run its whole loop natively; yields make the two meet at the breakpoint.
      for (uint64_t i = 0; i < kN; ++i) {
        sums[index - 1] += wmc_walk(&bufs[index - 1][i], 1, 8);
        if (i % 16 == 0) sched_yield();
      }
      cap::remove_thread(tid());
    };
    std::thread a(body, 1), b(body, 2);
    tracked.wait();
    sample(wmc_walk_load, u(bufs), 1, profile::kAccessRead, 4);
    cap::tick(now());
    ASSERT_EQ(cap::stats().windows, 1u);
    go.count_down();
    a.join();
    b.join();
    cap::stop();
    EXPECT_EQ(sums[0], kN);
    EXPECT_EQ(sums[1], kN);
    const auto got = captures();
    const cap::Stats s = cap::stats();
    EXPECT_EQ(s.dropped, 0u);
    EXPECT_EQ(got.size(), s.captures);
    EXPECT_GT(got.size(), 0u);
    uint64_t last[3] = {0, 0, 0};
    size_t per[3] = {};
    for (const auto& r : got) {
      ++per[r.thread < 3 ? r.thread : 0];
      ASSERT_TRUE(r.thread == 1 || r.thread == 2);
      const uint64_t* base = bufs[r.thread - 1];
      ASSERT_GE(r.addr, u(base));
      ASSERT_LT(r.addr, u(base + kN));
      EXPECT_EQ((r.addr - u(base)) % 8, 0u);
      EXPECT_GT(r.addr + 1, last[r.thread]);  // increasing per thread
      last[r.thread] = r.addr + 1;
      EXPECT_EQ(r.ip, u(wmc_walk_load));
    }
    std::fprintf(stderr, "round %d: %zu + %zu of %llu executions captured, %llu bounces, %llu stale, %llu passed\n",
                 round, per[1], per[2], (unsigned long long)(2 * kN), (unsigned long long)s.int3_bounces,
                 (unsigned long long)s.int3_stale, (unsigned long long)s.int3_passed);
    EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  }
}

// A child forked while the window is armed inherits the patched code: it runs the instruction
// (its first trap restores the bytes) and exits normally, with or without forget_after_fork;
// the parent's window goes on capturing.
TEST_F(SoftCaptureInt3, ForkedChildRunsThePatchedInstructionAndExits) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  ASSERT_EQ(cap::add_thread(tid(), 0), 0);
  static uint64_t buf[64];
  for (auto& x : buf) x = 2;
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  cap::tick(now());
  ASSERT_EQ(cap::stats().windows, 1u);
  ASSERT_EQ(first_byte(wmc_walk_load), 0xCC);
  for (int forget = 0; forget < 2; ++forget) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      if (forget) cap::forget_after_fork();
      const uint64_t sum = wmc_walk(buf, 8, 8);
      const bool ok = sum == 16 && walk_bytes().same_as(wmc_walk_load) && wmc_walk(buf, 4, 8) == 8;
      _exit(ok ? 0 : 3);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  EXPECT_EQ(first_byte(wmc_walk_load), 0xCC);  // the parent's window is untouched
  EXPECT_EQ(wmc_walk(buf, 8, 8), 16u);
  EXPECT_EQ(cap::capture_count(), 8u);
  cap::remove_thread(tid());
}

void die_of_own_int3(bool reinit) {
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  if (reinit) {
    // A process of its own (the stage's pid is this child's): the parent path, not the child's.
    cap::Config c;
    c.signo = SIGRTMIN + 5;
    c.max_threads = 4;
    c.max_windows = 4;
    c.max_captures = 64;
    c.probe = false;
    c.force_int3 = true;
    if (cap::init(c, nullptr) != 0) _exit(4);
  }
  asm volatile("int3");
  _exit(0);  // not reached: the default action of SIGTRAP terminates
}

// The program's own int3 is not the stage's: it gets SIGTRAP's default action (dies of it), in
// the process that set the stage up and in a forked child.
TEST_F(SoftCaptureInt3, ProgramsOwnInt3GetsTheDefaultAction) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  ASSERT_EQ(cap::add_thread(tid(), 0), 0);
  static uint64_t buf[64];
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  cap::tick(now());
  ASSERT_EQ(cap::stats().windows, 1u);
  for (int reinit = 0; reinit < 2; ++reinit) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) die_of_own_int3(reinit);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), SIGTRAP);
  }
  // Ours still works here.
  wmc_walk(buf, 4, 8);
  EXPECT_EQ(cap::capture_count(), 4u);
  cap::remove_thread(tid());
}

// A thread with SIGTRAP blocked would be killed by the kernel at the int3 (force_sig resets the
// handler): while one exists, no window is armed (counted); once it unblocks, the next tick arms.
TEST_F(SoftCaptureInt3, NoWindowWhileAThreadBlocksSIGTRAP) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  ASSERT_EQ(cap::add_thread(tid(), 0), 0);
  static uint64_t buf[64];
  std::latch blocked(1), unblock(1), unblocked(1), done(1);
  std::thread t([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTRAP);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    blocked.count_down();
    unblock.wait();
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    unblocked.count_down();
    done.wait();
  });
  blocked.wait();
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  cap::Config c = config();
  uint64_t t0 = now();
  cap::tick(t0);
  EXPECT_EQ(cap::stats().windows, 0u);
  EXPECT_EQ(cap::stats().sigtrap_blocked, 1u);
  EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  unblock.count_down();
  unblocked.wait();
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 8);  // (counts decayed meanwhile)
  cap::tick(t0 + c.rearm_ns);  // the candidate's turn again
  EXPECT_EQ(cap::stats().windows, 1u);
  EXPECT_EQ(first_byte(wmc_walk_load), 0xCC);
  done.count_down();
  t.join();
  wmc_walk(buf, 4, 8);
  EXPECT_EQ(cap::capture_count(), 4u);
  cap::remove_thread(tid());
}

// The protocol's rare interleavings, played deterministically by calling the SIGTRAP handler on
// synthetic contexts (what the kernel would pass) in the order a race would produce them:
// a bounce (another thread re-inserted the int3 while this one was about to step), the last
// stepper re-inserting, a window ending while a thread steps (nothing written after the close),
// and a trap delivered after its int3 was removed (re-executed, not recorded).
TEST_F(SoftCaptureInt3, ProtocolInterleavingsPlayedOnTheHandler) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  ASSERT_EQ(cap::add_thread(tid(), 0), 0);
  static uint64_t buf[64];
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  cap::tick(now());
  ASSERT_EQ(cap::stats().windows, 1u);
  const uint64_t ip = u(wmc_walk_load);
  ASSERT_EQ(first_byte(wmc_walk_load), 0xCC);
  ucontext_t uc{};
  _libc_fpstate fp{};
  uc.uc_mcontext.fpregs = &fp;
  uc.uc_mcontext.gregs[REG_RDI] = greg_t(u(&buf[3]));
  siginfo_t trap{}, step{};
  trap.si_signo = step.si_signo = SIGTRAP;
  trap.si_code = SI_KERNEL;
  step.si_code = TRAP_TRACE;
  constexpr greg_t kTF = 0x100;
  auto deliver = [&](siginfo_t& si, uint64_t rip) {
    uc.uc_mcontext.gregs[REG_RIP] = greg_t(rip);
    cap::detail::int3_on_sigtrap(SIGTRAP, &si, &uc);
  };
  // A hit: recorded, byte restored, rip back on the instruction, TF set.
  deliver(trap, ip + 1);
  EXPECT_EQ(uint64_t(uc.uc_mcontext.gregs[REG_RIP]), ip);
  EXPECT_TRUE(uc.uc_mcontext.gregs[REG_EFL] & kTF);
  EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  EXPECT_EQ(cap::stats().captures, 1u);
  // Another thread, done stepping, re-inserted meanwhile: our step meets the int3 (a bounce).
  *const_cast<volatile uint8_t*>(wmc_walk_load) = 0xCC;
  deliver(trap, ip + 1);
  EXPECT_EQ(cap::stats().int3_bounces, 1u);
  EXPECT_EQ(uint64_t(uc.uc_mcontext.gregs[REG_RIP]), ip);
  EXPECT_TRUE(uc.uc_mcontext.gregs[REG_EFL] & kTF);
  EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  EXPECT_EQ(cap::stats().captures, 1u);  // not recorded twice
  // The step completes: the last stepper re-inserts, TF cleared.
  deliver(step, ip + 3);
  EXPECT_FALSE(uc.uc_mcontext.gregs[REG_EFL] & kTF);
  EXPECT_EQ(first_byte(wmc_walk_load), 0xCC);
  // A hit, then the window ends while the thread steps: its completion writes nothing.
  deliver(trap, ip + 1);
  EXPECT_EQ(cap::stats().captures, 2u);
  cap::stop();
  EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  deliver(step, ip + 3);
  EXPECT_FALSE(uc.uc_mcontext.gregs[REG_EFL] & kTF);
  EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  // A trap of the removed int3 delivered late: re-executed, not recorded.
  deliver(trap, ip + 1);
  EXPECT_EQ(uint64_t(uc.uc_mcontext.gregs[REG_RIP]), ip);
  EXPECT_FALSE(uc.uc_mcontext.gregs[REG_EFL] & kTF);
  EXPECT_EQ(cap::stats().int3_stale, 1u);
  EXPECT_EQ(cap::stats().captures, 2u);
  EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  cap::remove_thread(tid());
}

void program_trap_handler(int) {}

// The program installs its own SIGTRAP handler after init: our int3s would reach it, so the next
// tick ends every window (bytes back) and the stage stops arming.
TEST_F(SoftCaptureInt3, ProgramTakingSIGTRAPLaterEndsTheWindows) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  ASSERT_EQ(cap::add_thread(tid(), 0), 0);
  static uint64_t buf[64];
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  cap::tick(now());
  ASSERT_EQ(cap::stats().windows, 1u);
  ASSERT_EQ(first_byte(wmc_walk_load), 0xCC);
  struct sigaction mine {}, ours {};
  mine.sa_handler = program_trap_handler;
  sigemptyset(&mine.sa_mask);
  ASSERT_EQ(sigaction(SIGTRAP, &mine, &ours), 0);
  cap::tick(now());
  EXPECT_EQ(cap::stats().sigtrap_taken, 1u);
  EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  EXPECT_EQ(page_perms(wmc_walk_load), perms_);
  sample(wmc_n1, 0x1000, 0, profile::kAccessRead, 8);
  cap::tick(now() + config().rearm_ns);
  EXPECT_EQ(cap::stats().windows, 1u);  // stopped
  EXPECT_EQ(wmc_walk(buf, 4, 8), 0u);   // runs untrapped
  ASSERT_EQ(sigaction(SIGTRAP, &ours, nullptr), 0);  // back to the stage's, for the next tests
  cap::remove_thread(tid());
}

// Pacing with Int3 charges int3_hit_cost_ns (not hit_cost_ns): 16 hits at 100 us exhaust a 1 ms
// budget, so the next candidate waits until time has paid the debt back.
TEST_F(SoftCaptureInt3, PacingChargesTheInt3HitCost) {
  cap::Config c = config();
  c.budget_permille = 1;
  c.hit_cost_ns = 1;  // would leave the budget positive if it were the one charged
  c.int3_hit_cost_ns = 100'000;
  ASSERT_EQ(cap::init(c, nullptr), 0);
  ASSERT_EQ(cap::add_thread(tid(), 0), 0);
  static uint64_t buf[64];
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  const uint64_t t0 = now();
  cap::tick(t0);
  ASSERT_EQ(cap::stats().windows, 1u);
  wmc_walk(buf, 16, 8);
  cap::tick(t0);  // full: ends, charged 1.6 ms
  EXPECT_TRUE(walk_bytes().same_as(wmc_walk_load));
  sample(wmc_store_op, u(buf), 0, profile::kAccessWrite, 8);
  cap::tick(t0);
  EXPECT_EQ(cap::stats().windows, 1u);  // in debt
  cap::tick(t0 + 1'000'000'000);
  EXPECT_EQ(cap::stats().windows, 2u);
  EXPECT_EQ(cap::capture_count(), 16u);
  cap::remove_thread(tid());
}

// The sharing stage has no software watchpoints: with Int3, shared lines arm nothing.
TEST_F(SoftCaptureInt3, NoWatchWindowsWithInt3) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  ASSERT_EQ(cap::add_thread(tid(), 0), 0);
  alignas(64) static uint64_t line[8];
  sample(wmc_store_op, u(&line[0]), 1, profile::kAccessWrite);
  sample(wmc_store_op, u(&line[1]), 2, profile::kAccessWrite);
  cap::tick(now());
  EXPECT_EQ(cap::stats().watch_windows, 0u);
  EXPECT_EQ(cap::stats().windows, 0u);
  cap::remove_thread(tid());
}

// Column walk of a global double m[64][1024], captured with real int3 traps: the profile built
// from samples and captures estimates as a conflict at L1 in the application.
TEST_F(SoftCaptureInt3, CapturedColumnWalkEstimatesAsAConflict) {
  cap::Config cfg = config();
  cfg.captures_per_window = 256;
  ASSERT_EQ(cap::init(cfg, nullptr), 0);
  static double m[64][1024];
  ASSERT_EQ(cap::add_thread(tid(), 0), 0);
  profile::Profile p;
  p.meta.mode = uint32_t(profile::Mode::Soft);
  p.meta.sample_source = uint32_t(profile::SampleSource::TaskClock);
  p.meta.capture_backend = uint32_t(cap::backend());
  p.meta.sample_period_ns = 1000;
  p.meta.exited = 1;
  p.meta.threads_seen = 1;
  p.command = "column walk";
  p.geometry = default_geometry();
  p.geometry_source = "default";
  p.counters.resize(p.geometry.levels.size());
  const uint64_t t0 = now();
  for (uint64_t i = 0; i < 64 * 1024; i += 97) {
    profile::SampleRecord s{};
    s.time_ns = t0 + i;
    s.ip = u(wmc_walk_load);
    s.addr = u(&m[i % 64][i / 64]);
    s.thread = 0;
    s.size = 8;
    s.flags = profile::kAccessRead;
    s.level = profile::kLevelUnknown;
    s.weight = 1000;
    p.samples.push_back(s);
    cap::note_sample(s);
  }
  p.meta.samples = p.samples.size();
  cap::tick(now());
  ASSERT_EQ(cap::stats().windows, 1u) << "first errno " << cap::stats().first_errno;
  for (int j = 0; j < 8; ++j) wmc_walk(&m[0][j], 64, sizeof m[0]);
  cap::tick(now());
  cap::stop();
  EXPECT_EQ(p.meta.capture_backend, uint32_t(profile::CaptureBackend::Int3));
  expect_column_walk_conflict(p, m);
  cap::remove_thread(tid());
}

// Not a check: what an int3 hit costs the trapped thread (int3 signal, record, step signal,
// two code writes), for Config::int3_hit_cost_ns. Printed; nothing timed is asserted.
TEST_F(SoftCaptureInt3, CostPerHit) {
  cap::Config c = config();
  c.captures_per_window = 1 << 20;
  ASSERT_EQ(cap::init(c, nullptr), 0);
  ASSERT_EQ(cap::add_thread(tid(), 0), 0);
  constexpr uint64_t kN = 20000;
  static uint64_t buf[kN];
  const uint64_t a = now();
  wmc_walk(buf, kN, 8);
  const uint64_t plain = now() - a;
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  cap::tick(now());
  ASSERT_EQ(cap::stats().windows, 1u);
  const uint64_t b = now();
  wmc_walk(buf, kN, 8);
  const uint64_t trapped = now() - b;
  cap::stop();
  EXPECT_EQ(cap::capture_count(), kN);
  const double per_hit = double(trapped - std::min(trapped, plain)) / double(kN);
  std::fprintf(stderr, "int3 capture cost: %.1f us per hit (%llu hits)\n", per_hit / 1000.0,
               (unsigned long long)kN);
  RecordProperty("int3_ns_per_hit", int(per_hit));
  cap::remove_thread(tid());
}

}  // namespace
}  // namespace whymiss::soft
