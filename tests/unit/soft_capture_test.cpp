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
#include <filesystem>
#include <string>
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

using namespace capture_test;  // now, u, sample, windows, captures

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
    c.probe = test::hw_breakpoints_fire();  // else traps are emulated (soft_capture_traps.h)
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

// Two threads write different words of one line; samples from both make it a shared line, so
// tick watches both words in both threads: each thread's writes to its word are captured with
// the exact word, as writes, in that thread (the sharing stage's evidence for false sharing).
TEST_F(SoftCapture, WatchpointsOnASharedLineSeeWhichThreadWroteWhichWord) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  alignas(64) static uint64_t line[8];
  std::latch tracked(2), armed(1);
  auto body = [&](uint32_t index, uint64_t* word, uint64_t n) {
    start_thread(index);
    tracked.count_down();
    armed.wait();
    test::with_traps([&] { wmc_store(word, n); });
    cap::remove_thread(tid());
  };
  std::thread a(body, 1, &line[0], 10), b(body, 2, &line[1], 12);
  tracked.wait();
  // One sample per thread: a shared line, but no hot instruction (min_samples 4).
  sample(wmc_store_op, u(&line[0]), 1, profile::kAccessWrite);
  sample(wmc_store_op, u(&line[1]), 2, profile::kAccessWrite);
  cap::tick(now());
  const cap::Stats armed_stats = cap::stats();
  EXPECT_EQ(armed_stats.windows, 2u) << "first errno " << armed_stats.first_errno;
  EXPECT_EQ(armed_stats.watch_windows, 2u);
  armed.count_down();
  a.join();
  b.join();
  cap::stop();

  const auto w = windows();
  ASSERT_EQ(w.size(), 2u);
  for (const auto& x : w) {
    EXPECT_EQ(x.reason, 1u);
    EXPECT_EQ(x.ip, u(wmc_store_op));  // the sampled writer, so support() counts the window
  }
  const auto c = captures();
  ASSERT_EQ(c.size(), 22u);
  uint32_t n[3] = {};
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_TRUE(c[i].thread == 1 || c[i].thread == 2);
    const uint64_t* word = c[i].thread == 1 ? &line[0] : &line[1];
    EXPECT_EQ(c[i].addr, u(word));
    EXPECT_EQ(c[i].ip, u(wmc_store_op));
    EXPECT_EQ(c[i].size, 8u);
    EXPECT_EQ(c[i].flags, profile::kAccessWrite);
    ASSERT_LT(c[i].window, w.size());
    EXPECT_EQ(w[c[i].window].captures, c[i].thread == 1 ? 10u : 12u);
    if (i && c[i].thread == c[i - 1].thread) {
      EXPECT_GE(c[i].time_ns, c[i - 1].time_ns);
    }
    ++n[c[i].thread];
  }
  EXPECT_EQ(n[1], 10u);
  EXPECT_EQ(n[2], 12u);
  EXPECT_NE(c[0].window, c[c.size() - 1].window);
  // Grouped by thread: one run of each.
  size_t switches = 0;
  for (size_t i = 1; i < c.size(); ++i) switches += c[i].thread != c[i - 1].thread;
  EXPECT_EQ(switches, 1u);
}

// Column walk of a global double m[64][1024] (rows 8 KiB apart: every element of a column is
// in the same L1 set). Samples of the walk choose the instruction, the window captures its
// first 256 executions, and the profile built from both estimates as exact mode would judge it:
// a conflict at L1 in the application. The two halves (stage and estimator) agree on the format.
TEST_F(SoftCapture, CapturedColumnWalkEstimatesAsAConflict) {
  cap::Config cfg = config();
  cfg.captures_per_window = 256;
  ASSERT_EQ(cap::init(cfg, nullptr), 0);
  static double m[64][1024];
  start_thread(0);
  profile::Profile p;
  p.meta.mode = uint32_t(profile::Mode::Soft);
  p.meta.sample_source = uint32_t(profile::SampleSource::TaskClock);
  p.meta.capture_backend = uint32_t(profile::CaptureBackend::HwBreakpoint);
  p.meta.sample_period_ns = 1000;
  p.meta.exited = 1;
  p.meta.threads_seen = 1;
  p.command = "column walk";
  p.geometry = default_geometry();
  p.geometry_source = "default";
  p.counters.resize(p.geometry.levels.size());
  const uint64_t t0 = now();
  for (uint64_t i = 0; i < 64 * 1024; i += 97) {  // what a sampler of the whole walk would see
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
  test::with_traps([&] {
    for (int j = 0; j < 8; ++j) wmc_walk(&m[0][j], 64, sizeof m[0]);
  });
  cap::tick(now());
  cap::stop();
  expect_column_walk_conflict(p, m);
  cap::remove_thread(tid());
}

// The sharing half end to end: two threads take turns (handed over by an atomic, no sleeping)
// writing their own word of one line, the watch windows capture the interleaving, and with the
// threads' samples the profile estimates as false sharing with disjoint write masks.
TEST_F(SoftCapture, WatchedInterleavingEstimatesAsFalseSharing) {
  cap::Config cfg = config();
  cfg.min_samples = 1000;  // watch windows only
  ASSERT_EQ(cap::init(cfg, nullptr), 0);
  alignas(64) static uint64_t line[8];
  profile::Profile p;
  p.meta.mode = uint32_t(profile::Mode::Soft);
  p.meta.sample_source = uint32_t(profile::SampleSource::TaskClock);
  p.meta.capture_backend = uint32_t(profile::CaptureBackend::HwBreakpoint);
  p.meta.sample_period_ns = 1000;
  p.meta.exited = 1;
  p.meta.threads_seen = 3;
  p.command = "ping-pong";
  p.geometry = default_geometry();
  p.geometry_source = "default";
  p.counters.resize(p.geometry.levels.size());
  const uint64_t t0 = now();
  for (uint32_t i = 0; i < 256; ++i) {  // what a sampler would see: both threads writing
    profile::SampleRecord r{};
    r.time_ns = t0 + i;
    r.ip = u(wmc_store_op);
    r.thread = 1 + i % 2;
    r.addr = u(&line[i % 2]);
    r.size = 8;
    r.flags = profile::kAccessWrite;
    r.level = profile::kLevelUnknown;
    r.weight = 1000;
    p.samples.push_back(r);
    cap::note_sample(r);
  }
  p.meta.samples = p.samples.size();
  std::latch tracked(2), armed(1);
  std::atomic<uint32_t> turn{1};
  auto body = [&](uint32_t index) {
    start_thread(index);
    tracked.count_down();
    armed.wait();
    for (int i = 0; i < 12; ++i) {
      while (turn.load() != index) {
      }
      test::with_traps([&] { wmc_store(&line[index - 1], 1); });
      turn.store(3 - index);
    }
    cap::remove_thread(tid());
  };
  std::thread a(body, 1), b(body, 2);
  tracked.wait();
  cap::tick(now());
  ASSERT_EQ(cap::stats().watch_windows, 2u);
  armed.count_down();
  a.join();
  b.join();
  cap::stop();
  p.windows = windows();
  p.captures = captures();
  ASSERT_EQ(p.captures.size(), 24u);

  Status st = analysis::estimate(p);
  ASSERT_TRUE(st.ok()) << st.error();
  const analysis::Analysis an = analysis::analyze(p);
  ASSERT_FALSE(an.findings.empty()) << (an.notes.empty() ? "" : an.notes[0]);
  const analysis::Finding& f = an.findings[0];
  EXPECT_STREQ(analysis::kind_name(f.kind), analysis::kind_name(analysis::Kind::FalseSharing));
  ASSERT_EQ(f.line_threads.size(), 2u);
  EXPECT_EQ(f.line_threads[0].write_mask & f.line_threads[1].write_mask, 0u);
  EXPECT_EQ(f.line_addr, u(line));
  EXPECT_EQ(analysis::support(p, f).windows, 2u);
}

// A forked child inherits the fds but not the events (they follow the parent's threads):
// after forget_after_fork nothing fires there and nothing is recorded; the parent's window is
// untouched and still captures.
TEST_F(SoftCapture, ForkedChildForgetsAndNothingFires) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  static uint64_t buf[64];
  start_thread(0);
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  cap::tick(now());
  ASSERT_EQ(cap::stats().windows, 1u);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    cap::forget_after_fork();
    const uint64_t ours = g_ours.load(), other = g_other.load();
    test::with_traps([&] { wmc_walk(buf, 8, 8); });
    cap::tick(now());  // stopped: arms nothing
    siginfo_t si{};
    si.si_code = POLL_IN;
    ucontext_t uc{};
    uc.uc_mcontext.gregs[REG_RIP] = greg_t(u(wmc_walk_load));
    RegisterView rv;
    rv.uc = &uc;
    bool claimed = false;
    for (int fd = 0; fd < 1024; ++fd) si.si_fd = fd, claimed = claimed || cap::on_signal(&si, rv, 0);
    const bool ok = g_ours.load() == ours && g_other.load() == other && cap::capture_count() == 0 &&
                    cap::window_count() == 1 && !claimed;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  test::with_traps([&] { wmc_walk(buf, 8, 8); });
  EXPECT_EQ(cap::capture_count(), 8u);
  cap::remove_thread(tid());
}

// Pacing: with a budget of 1 ms (1 per mille of one second) and 100 us charged per hit, one
// full window of 16 hits (1.6 ms) exhausts it: the next candidate waits until time has paid the
// debt back. Times are passed to tick, so nothing here depends on the clock's pace.
TEST_F(SoftCapture, PacingHoldsNewWindowsUntilTheBudgetRecovers) {
  cap::Config c = config();
  c.budget_permille = 1;
  c.hit_cost_ns = 100'000;
  ASSERT_EQ(cap::init(c, nullptr), 0);
  static uint64_t buf[64];
  start_thread(0);
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  const uint64_t t0 = now();
  cap::tick(t0);
  ASSERT_EQ(cap::stats().windows, 1u);
  test::with_traps([&] { wmc_walk(buf, 16, 8); });
  cap::tick(t0);  // full: ends and is charged 1.6 ms
  sample(wmc_store_op, u(buf), 0, profile::kAccessWrite, 8);
  cap::tick(t0);
  EXPECT_EQ(cap::stats().windows, 1u);  // in debt: nothing new
  cap::tick(t0 + 1'000'000'000);        // a second later: +1 ms, debt paid
  ASSERT_EQ(cap::stats().windows, 2u);
  const auto w = windows();
  EXPECT_EQ(w[0].ip, u(wmc_walk_load));
  EXPECT_EQ(w[0].captures, 16u);
  EXPECT_EQ(w[0].end_ns, t0);
  EXPECT_EQ(w[1].ip, u(wmc_store_op));  // rotation: the captured instruction waits its turn
  cap::remove_thread(tid());
}

// Where debug registers accept events but never fire, the stage says so at init instead of
// arming windows that stay empty.
TEST_F(SoftCapture, ProbeRefusesMachinesWhoseBreakpointsNeverFire) {
  cap::Config c = config();
  c.probe = true;
  c.allow_int3 = false;
  EXPECT_EQ(cap::init(c, nullptr), test::hw_breakpoints_fire() ? 0 : ENODEV);
  EXPECT_EQ(cap::backend(), test::hw_breakpoints_fire() ? profile::CaptureBackend::HwBreakpoint
                                                        : profile::CaptureBackend::None);
}

// The fallback to int3 needs SIGTRAP; here the trap emulation owns it (on a machine whose
// breakpoints fire, init keeps the hardware): refused with EBUSY, counted, the stage off.
// (The Int3 backend itself is tested in soft_capture_int3_test, where SIGTRAP is free.)
TEST_F(SoftCapture, Int3FallbackRefusedWhenSIGTRAPIsTaken) {
  cap::Config c = config();
  c.probe = true;
  const uint64_t owned = cap::stats().sigtrap_owned;
  if (test::hw_breakpoints_fire()) {
    EXPECT_EQ(cap::init(c, nullptr), 0);
    EXPECT_EQ(cap::backend(), profile::CaptureBackend::HwBreakpoint);
    return;
  }
  EXPECT_EQ(cap::init(c, nullptr), EBUSY);
  EXPECT_EQ(cap::backend(), profile::CaptureBackend::None);
  EXPECT_EQ(cap::stats().sigtrap_owned, owned + 1);
}

int perf_fds() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec);
    n += !ec && target.string().find("perf_event") != std::string::npos;
  }
  return n;
}

// Threads come and go while the collector arms and ends windows: every event is opened for a
// live thread (no refusals), every fd is closed at the end, and the window table's bound holds.
TEST_F(SoftCapture, ThreadsComingAndGoingWhileTickingLeaveNothingOpen) {
  cap::Config c = config();
  c.max_windows = 600;
  ASSERT_EQ(cap::init(c, nullptr), 0);
  const int before = perf_fds();
  start_thread(0);  // always one live thread, so windows are armed whatever the scheduling
  std::atomic<bool> done{false};
  std::vector<std::thread> workers;
  for (uint32_t i = 1; i <= 4; ++i)
    workers.emplace_back([&, i] {
      for (int r = 0; r < 200 || !done.load(); ++r) {
        ASSERT_EQ(cap::add_thread(tid(), i), 0);
        cap::remove_thread(tid());
        if (r > 100000) break;
      }
    });
  const uint8_t* ips[] = {wmc_n1, wmc_n2, wmc_n3, wmc_n4};
  uint64_t t = now();
  for (int r = 0; r < 200; ++r) {
    for (const uint8_t* ip : ips) sample(ip, 0x1000, 0, profile::kAccessRead, 8);
    t += c.window_ns + 1;  // every window expires at the next tick
    cap::tick(t);
  }
  done = true;
  for (auto& w : workers) w.join();
  cap::stop();
  cap::remove_thread(tid());
  EXPECT_EQ(cap::stats().open_failures, 0u) << "first errno " << cap::stats().first_errno;
  EXPECT_LE(cap::stats().windows, 600u);
  EXPECT_GT(cap::stats().windows, 0u);
  EXPECT_EQ(perf_fds(), before);
}

// The run's capture pool is bounded: past max_captures, traps are dropped and counted (in the
// window and in the stats), never stored out of bounds.
TEST_F(SoftCapture, FullCapturePoolDropsAndCounts) {
  cap::Config c = config();
  c.max_captures = 10;
  ASSERT_EQ(cap::init(c, nullptr), 0);
  static uint64_t buf[64];
  start_thread(0);
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  cap::tick(now());
  ASSERT_EQ(cap::stats().windows, 1u);
  test::with_traps([&] { wmc_walk(buf, 16, 8); });
  cap::stop();
  EXPECT_EQ(cap::capture_count(), 10u);
  EXPECT_EQ(cap::stats().captures, 10u);
  EXPECT_EQ(cap::stats().dropped, 6u);
  const auto w = windows();
  EXPECT_EQ(w[0].captures, 10u);
  EXPECT_EQ(w[0].dropped, 6u);
  const auto got = captures();
  ASSERT_EQ(got.size(), 10u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].addr, u(&buf[i]));
  cap::remove_thread(tid());
}

// A thread that starts while a window is open gets it at the next tick; a window nobody fills
// ends when window_ns has passed, with the tick's time as its end.
TEST_F(SoftCapture, LateThreadsJoinOpenWindowsAndIdleWindowsExpire) {
  ASSERT_EQ(cap::init(config(), nullptr), 0);
  static uint64_t buf[64];
  start_thread(0);
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 4);
  sample(wmc_n1, u(buf), 0, profile::kAccessRead, 4);
  const uint64_t t0 = now();
  cap::tick(t0);
  ASSERT_EQ(cap::stats().windows, 2u);
  std::latch tracked(1), joined(1);
  std::thread late([&] {
    start_thread(1);
    tracked.count_down();
    joined.wait();
    test::with_traps([&] { wmc_walk(buf, 4, 16); });
    cap::remove_thread(tid());
  });
  tracked.wait();
  cap::tick(t0 + 1);  // arms the open windows in thread 1
  joined.count_down();
  late.join();
  const uint64_t t_end = t0 + config().window_ns;
  cap::tick(t_end);  // both expire (thread 0 never ran either instruction)
  const auto w = windows();
  ASSERT_EQ(w.size(), 2u);
  for (const auto& x : w) EXPECT_EQ(x.end_ns, t_end);
  const auto c = captures();
  ASSERT_EQ(c.size(), 4u);
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].thread, 1u);
    EXPECT_EQ(c[i].addr, u(&buf[2 * i]));
    EXPECT_EQ(w[c[i].window].ip, u(wmc_walk_load));
  }
  EXPECT_EQ(cap::stats().open_failures, 0u);
  cap::remove_thread(tid());
}

// Not a check: the costs the pacing defaults rest on, printed for bench/README (nothing timed
// is asserted). Arming = perf_event_open + 3 fcntl + REFRESH per thread and slot; closing =
// close; the signal path = on_signal on a synthetic trap of an armed window (decode_at, clock,
// append), i.e. the stage's share of a hit without the kernel's (~10 us measured elsewhere).
TEST_F(SoftCapture, CostOfArmingAndOfTheSignalPath) {
  cap::Config c = config();
  c.captures_per_window = 1 << 20;
  c.max_windows = 4096;
  c.max_captures = 1 << 20;
  ASSERT_EQ(cap::init(c, nullptr), 0);
  start_thread(0);
  const uint8_t* ips[] = {wmc_n1, wmc_n2, wmc_n3, wmc_n4};
  uint64_t arm_ns = 0, close_ns = 0;
  const int rounds = 50;
  uint64_t t = now();
  for (int r = 0; r < rounds; ++r) {
    for (const uint8_t* ip : ips) sample(ip, 0x1000, 0, profile::kAccessRead, 8);  // halved by decay
    t += 2 * c.window_ns;  // past the last round's ticks and every re-arm cooldown
    const uint64_t a = now();
    cap::tick(t);
    const uint64_t b = now();
    arm_ns += b - a;
    cap::tick(t + c.window_ns);  // all four expire and close
    close_ns += now() - b;
  }
  ASSERT_EQ(cap::stats().windows, uint64_t(4 * rounds));
  ASSERT_EQ(cap::stats().open_failures, 0u);
  // The signal path: a window on wmc_walk_load, its event's fd, a context about to run it.
  static uint64_t buf[4096];
  sample(wmc_walk_load, u(buf), 0, profile::kAccessRead, 8);
  cap::tick(t + 2 * c.window_ns);
  const auto& st = cap::detail::g();
  int fd = -1;
  for (uint32_t k = 0; k < 4; ++k)
    if (st.threads[0].fd[k] >= 0 && st.windows[st.threads[0].window[k]].ip == u(wmc_walk_load)) fd = st.threads[0].fd[k];
  ASSERT_GE(fd, 0);
  ucontext_t uc{};
  _libc_fpstate fp{};
  uc.uc_mcontext.fpregs = &fp;
  uc.uc_mcontext.gregs[REG_RIP] = greg_t(u(wmc_walk_load));
  RegisterView rv;
  rv.uc = &uc;
  rv.fs_base = t_fs_base;
  siginfo_t si{};
  si.si_code = POLL_IN;
  si.si_fd = fd;
  const int calls = 20000;
  const uint64_t a = now();
  for (int i = 0; i < calls; ++i) {
    uc.uc_mcontext.gregs[REG_RDI] = greg_t(u(&buf[i % 4096]));
    ASSERT_TRUE(cap::on_signal(&si, rv, 0));
  }
  const uint64_t sig_ns = now() - a;
  EXPECT_EQ(cap::stats().captures, uint64_t(calls));
  std::fprintf(stderr, "capture costs: arm %.1f us, close %.1f us per event; on_signal %.0f ns per capture\n",
               double(arm_ns) / (4.0 * rounds) / 1000.0, double(close_ns) / (4.0 * rounds) / 1000.0,
               double(sig_ns) / calls);
  RecordProperty("arm_us_per_event", int(arm_ns / (4 * rounds) / 1000));
  RecordProperty("on_signal_ns", int(sig_ns / calls));
  cap::remove_thread(tid());
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
  const int armed = cap::detail::g().threads[0].fd[0];
  ASSERT_GE(armed, 0);
  ucontext_t uc{};
  RegisterView rv;
  rv.uc = &uc;
  for (int fd = 0; fd < 1024; ++fd) {
    siginfo_t si = poll_signal(fd);
    // The armed event's signal is ours, but delivered away from its instruction (as when the
    // thread had it blocked): counted, not stored. And only in the thread it was armed for.
    EXPECT_EQ(cap::on_signal(&si, rv, 0), fd == armed) << fd;
    EXPECT_FALSE(cap::on_signal(&si, rv, 1)) << fd;
  }
  EXPECT_EQ(cap::stats().dropped, 1u);
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
