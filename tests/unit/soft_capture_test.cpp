// The capture stage with real hardware breakpoints: windows on known instructions capture
// exactly the addresses the code accessed, watchpoints see which thread wrote which word, the
// output replays through estimate()/analyze(), refusals are counted, forks forget.
// Synchronisation is by latches and joins, never by sleeping; no timing is asserted.
#include <asm/prctl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <latch>
#include <thread>
#include <vector>

#include "runtime/soft/capture.h"
#include "runtime/soft/decode.h"
#include "soft_capture_code.h"
#include "soft_capture_traps.h"

namespace whymiss::soft {
namespace {

namespace cap = capture;

thread_local uint64_t t_fs_base = 0;
thread_local uint32_t t_index = 0;
std::atomic<uint64_t> g_ours{0}, g_other{0};

// What the runtime's handler does: a register view from the context, then the stage first.
void handler(int, siginfo_t* si, void* ctx) {
  RegisterView rv;
  rv.uc = static_cast<const ucontext_t*>(ctx);
  rv.fs_base = t_fs_base;
  if (cap::on_signal(si, rv, t_index)) g_ours.fetch_add(1);
  else g_other.fetch_add(1);
}

pid_t tid() { return pid_t(syscall(SYS_gettid)); }

// Thread start as the runtime does it: fs base read once, index given, then tracked.
void start_thread(uint32_t index) {
  syscall(SYS_arch_prctl, ARCH_GET_FS, &t_fs_base);
  t_index = index;
  ASSERT_EQ(cap::add_thread(tid(), index), 0);
}

uint64_t now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}
uint64_t u(const void* p) { return reinterpret_cast<uint64_t>(p); }

void sample(const void* ip, uint64_t addr, uint32_t thread, uint8_t flags, int times = 1) {
  profile::SampleRecord s{};
  s.time_ns = now();
  s.ip = u(ip);
  s.addr = addr;
  s.thread = thread;
  s.size = 8;
  s.flags = flags;
  s.level = profile::kLevelUnknown;
  for (int i = 0; i < times; ++i) cap::note_sample(s);
}

std::vector<profile::WindowRecord> windows() {
  std::vector<profile::WindowRecord> w(cap::window_count());
  w.resize(cap::export_windows(w.data(), w.size()));
  return w;
}
std::vector<profile::CaptureRecord> captures() {
  std::vector<profile::CaptureRecord> c(cap::capture_count());
  c.resize(cap::export_captures(c.data(), c.size()));
  return c;
}

class SoftCapture : public ::testing::Test {
 protected:
  static int signo() { return SIGRTMIN + 5; }
  static void SetUpTestSuite() {
    ASSERT_TRUE(init(1 << 20));
    struct sigaction sa {};
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(signo(), &sa, nullptr), 0);
    test::init_traps(handler, signo());
    if (!test::hw_breakpoints_fire())
      std::fprintf(stderr, "note: debug-register breakpoints do not fire on this machine; traps are "
                           "emulated by single-stepping (soft_capture_traps.h)\n");
  }
  // Windows long enough never to expire during a test: they end because they are full.
  static cap::Config config() {
    cap::Config c;
    c.signo = signo();
    c.max_threads = 64;
    c.captures_per_window = 16;
    c.window_ns = 60'000'000'000ull;
    c.max_windows = 64;
    c.max_captures = 1 << 16;
    return c;
  }
  void TearDown() override { cap::stop(); }
};

// The collector (this thread) arms a window in a worker; the worker's loop is captured exactly.
TEST_F(SoftCapture, HotInstructionCapturesTheLoopsAddressesInAnotherThread) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  static uint64_t buf[64 * 8];
  std::latch tracked(1), armed(1);
  std::thread worker([&] {
    start_thread(1);
    tracked.count_down();
    armed.wait();
    test::with_traps([&] { wmc_walk(buf, 40, 64); });  // 40 executions; the window takes 16
    cap::remove_thread(tid());
  });
  tracked.wait();
  sample(wmc_walk_load, u(buf), 1, profile::kAccessRead, 4);
  const uint64_t t0 = now();
  cap::tick(t0);
  EXPECT_EQ(cap::stats().windows, 1u) << "first errno " << cap::stats().first_errno;
  armed.count_down();
  worker.join();
  cap::tick(now());  // the window is full in every thread it was armed in: it ends
  cap::stop();

  const auto w = windows();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].ip, u(wmc_walk_load));
  EXPECT_EQ(w[0].reason, 0u);
  EXPECT_EQ(w[0].captures, 16u);
  EXPECT_EQ(w[0].dropped, 0u);
  EXPECT_GE(w[0].start_ns, t0);
  EXPECT_GE(w[0].end_ns, w[0].start_ns);
  const auto c = captures();
  ASSERT_EQ(c.size(), 16u);  // the refresh bound: no more than captures_per_window
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].addr, u(buf) + 64 * i) << i;
    EXPECT_EQ(c[i].ip, u(wmc_walk_load));
    EXPECT_EQ(c[i].thread, 1u);
    EXPECT_EQ(c[i].window, 0u);
    EXPECT_EQ(c[i].size, 8u);
    EXPECT_EQ(c[i].flags, profile::kAccessRead);
    if (i) {
      EXPECT_GE(c[i].time_ns, c[i - 1].time_ns);
    }
  }
  const cap::Stats s = cap::stats();
  EXPECT_EQ(s.captures, 16u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(s.open_failures, 0u);
}

TEST_F(SoftCapture, InvalidConfigsAreRefusedAtInit) {
  cap::Config c = config();
  c.slots = 9;  // more than the tables are sized for
  EXPECT_EQ(cap::init(c, nullptr), EINVAL);
  c = config();
  c.signo = 0;
  EXPECT_EQ(cap::init(c, nullptr), EINVAL);
  c = config();
  c.captures_per_window = 0;  // REFRESH(0) would not bound the window
  EXPECT_EQ(cap::init(c, nullptr), EINVAL);
  errno = 1234;
  EXPECT_EQ(cap::init(config(), nullptr), 0);
  EXPECT_EQ(errno, 1234);
}

// Five slots on a CPU with four debug registers: the fifth window is refused by the kernel
// (ENOSPC), counted, and the other four are armed.
TEST_F(SoftCapture, MoreSlotsThanDebugRegistersAreCountedNotFatal) {
  cap::Config c = config();
  c.slots = 5;
  ASSERT_EQ(cap::init(c, nullptr), 0);
  start_thread(0);
  const uint8_t* ips[] = {wmc_n1, wmc_n2, wmc_n3, wmc_n4, wmc_n5};
  for (const uint8_t* ip : ips) sample(ip, 0x1000, 0, profile::kAccessRead, 4);
  errno = 77;
  cap::tick(now());
  EXPECT_EQ(errno, 77);
  const cap::Stats s = cap::stats();
  EXPECT_EQ(s.windows, 4u);
  EXPECT_EQ(s.open_failures, 1u);
  EXPECT_EQ(s.first_errno, ENOSPC);
  cap::remove_thread(tid());
}

TEST_F(SoftCapture, InstructionInNoMappingIsRejectedNotArmed) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  start_thread(0);
  profile::SampleRecord s{};
  s.ip = 0x10;  // below any mapping
  s.addr = 0x1000;
  s.size = 8;
  s.flags = profile::kAccessRead;
  for (int i = 0; i < 8; ++i) cap::note_sample(s);
  cap::tick(now());
  EXPECT_EQ(cap::stats().windows, 0u);
  EXPECT_EQ(cap::stats().rejected, 1u);
  EXPECT_EQ(cap::stats().open_failures, 0u);
  cap::remove_thread(tid());
}

siginfo_t poll_signal(int fd) {
  siginfo_t si{};
  si.si_signo = SIGRTMIN + 5;
  si.si_code = POLL_IN;
  si.si_fd = fd;
  return si;
}

// Signals of fds that are not (or no longer) the stage's are left to the runtime.
TEST_F(SoftCapture, SignalsOfOtherOrClosedFdsAreNotOurs) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  start_thread(0);
  sample(wmc_n1, 0x1000, 0, profile::kAccessRead, 4);
  cap::tick(now());
  ASSERT_EQ(cap::stats().windows, 1u);
  ucontext_t uc{};
  RegisterView rv;
  rv.uc = &uc;
  for (int fd = 0; fd < 1024; ++fd) {  // the armed event's fd too: rip is not on its instruction
    siginfo_t si = poll_signal(fd);
    EXPECT_FALSE(cap::on_signal(&si, rv, 0)) << fd;
  }
  siginfo_t kill_like{};
  kill_like.si_code = SI_USER;
  EXPECT_FALSE(cap::on_signal(&kill_like, rv, 0));
  EXPECT_FALSE(cap::on_signal(nullptr, rv, 0));
  cap::stop();  // closes the event: its fd is stale from now on
  uc.uc_mcontext.gregs[REG_RIP] = greg_t(u(wmc_n1));
  for (int fd = 0; fd < 1024; ++fd) {
    siginfo_t si = poll_signal(fd);
    EXPECT_FALSE(cap::on_signal(&si, rv, 0)) << fd;
  }
  EXPECT_EQ(cap::stats().captures, 0u);
  cap::remove_thread(tid());
}

}  // namespace
}  // namespace whymiss::soft
