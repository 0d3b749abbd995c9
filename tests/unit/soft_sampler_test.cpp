// The soft runtime's sampling pieces on their own: which signal it takes, the task-clock event
// signalling the thread that ran, the refusal sentence, the sample store's overflow accounting,
// and what a forked child inherits.
#include <errno.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <string>
#include <thread>

#include "runtime/soft/sampler.h"

namespace whymiss::soft {
namespace {

void ignore_handler(int) {}

TEST(SoftSignal, SkipsSignalsWithHandlersOrBlocked) {
  const int lo = SIGRTMIN + 8;
  ASSERT_EQ(pick_signal(lo, SIGRTMAX), lo);
  struct sigaction sa {}, old0 {}, old1 {};
  sa.sa_handler = ignore_handler;
  ASSERT_EQ(sigaction(lo, &sa, &old0), 0);
  sigset_t one, prev;
  sigemptyset(&one);
  sigaddset(&one, lo + 1);
  pthread_sigmask(SIG_BLOCK, &one, &prev);
  sa.sa_handler = SIG_IGN;  // ignored counts as taken too
  ASSERT_EQ(sigaction(lo + 2, &sa, &old1), 0);
  EXPECT_EQ(pick_signal(lo, SIGRTMAX), lo + 3);
  EXPECT_EQ(pick_signal(lo, lo + 2), 0) << "no free signal in the range";
  pthread_sigmask(SIG_SETMASK, &prev, nullptr);
  sigaction(lo, &old0, nullptr);
  sigaction(lo + 2, &old1, nullptr);
  EXPECT_EQ(pick_signal(lo, SIGRTMAX), lo);
}

// Signals of the event opened below: counted per receiving thread.
std::atomic<int> g_fd{-1};
std::atomic<int> g_hits{0}, g_wrong_thread{0}, g_wrong_code{0};
std::atomic<pid_t> g_owner{0};

void on_sample(int, siginfo_t* si, void*) {
  int saved = errno;
  if (si->si_fd == g_fd.load()) {
    if (pid_t(syscall(SYS_gettid)) != g_owner.load()) g_wrong_thread++;
    if (si->si_code != POLL_IN) g_wrong_code++;
    g_hits++;
  }
  errno = saved;
}

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

volatile uint64_t g_sink;

// Spins on CPU until `hits` reaches n or `limit_ns` of this thread's CPU time went by.
void spin_until(int n, uint64_t limit_ns) {
  const uint64_t start = thread_cpu_ns();
  uint64_t x = 1;
  while (g_hits.load() < n && thread_cpu_ns() - start < limit_ns)
    for (int i = 0; i < 10000; ++i) x = x * 6364136223846793005ull + 1;
  g_sink = x;
}

TEST(SoftTaskClock, SignalsTheThreadThatRan) {
  const int signo = pick_signal();
  ASSERT_GT(signo, 0);
  struct sigaction sa {}, old {};
  sa.sa_sigaction = on_sample;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(signo, &sa, &old), 0);
  g_hits = 0;
  // The event belongs to a helper thread; the test thread stays idle in join(), so a signal
  // routed to the process rather than to the thread would be seen on the wrong thread.
  int fd = -1;
  std::thread worker([&] {
    g_owner = pid_t(syscall(SYS_gettid));
    fd = open_task_clock(g_owner.load(), 200'000, signo);
    if (fd < 0) return;
    g_fd = fd;
    spin_until(20, 3'000'000'000ull);
    close(fd);
  });
  worker.join();
  sigaction(signo, &old, nullptr);
  ASSERT_GE(fd, 0) << "perf_event_open: " << std::strerror(-fd);
  EXPECT_GE(g_hits.load(), 20) << "one signal per 200 us of the thread's CPU time";
  EXPECT_EQ(g_wrong_thread.load(), 0);
  EXPECT_EQ(g_wrong_code.load(), 0);
}

TEST(SoftTaskClock, ForkedChildGetsNoSignalsOfTheParentsEvent) {
  const int signo = pick_signal();
  ASSERT_GT(signo, 0);
  struct sigaction sa {}, old {};
  sa.sa_sigaction = on_sample;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(signo, &sa, &old), 0);
  g_owner = pid_t(syscall(SYS_gettid));
  int fd = open_task_clock(g_owner.load(), 200'000, signo);
  ASSERT_GE(fd, 0) << std::strerror(-fd);
  g_fd = fd;
  pid_t child = fork();
  if (child == 0) {
    // The child inherits the descriptor, not the counting: its CPU time raises no signal
    // (F_OWNER_TID names the parent's thread), and closing its copy leaves the parent's event.
    g_hits = 0;
    spin_until(1, 300'000'000ull);
    int hits = g_hits.load();
    close(fd);
    _exit(hits == 0 ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child received samples";
  g_hits = 0;
  spin_until(5, 3'000'000'000ull);
  EXPECT_GE(g_hits.load(), 5) << "the parent's event still counts after the child closed its copy";
  close(fd);
  sigaction(signo, &old, nullptr);
}

TEST(SoftRefusal, NamesCauseAndFix) {
  char b[512];
  refusal_message(EACCES, 3, b, sizeof b);
  std::string s = b;
  EXPECT_NE(s.find("perf_event_paranoid is 3"), std::string::npos) << s;
  EXPECT_NE(s.find("sysctl kernel.perf_event_paranoid=2"), std::string::npos) << s;
  EXPECT_NE(s.find("CAP_PERFMON"), std::string::npos) << s;
  refusal_message(EPERM, 2, b, sizeof b);
  s = b;
  EXPECT_NE(s.find("seccomp"), std::string::npos) << s;
  EXPECT_NE(s.find("allow the perf_event_open system call"), std::string::npos) << s;
  refusal_message(ENOSYS, INT_MIN, b, sizeof b);
  EXPECT_NE(std::string(b).find("CONFIG_PERF_EVENTS"), std::string::npos) << b;
  refusal_message(EMFILE, 2, b, sizeof b);
  EXPECT_NE(std::string(b).find("ulimit -n"), std::string::npos) << b;
  for (int e : {EACCES, EPERM, ENOSYS, ENOENT, EMFILE, EIO}) {
    refusal_message(e, 2, b, sizeof b);
    EXPECT_EQ(std::strchr(b, '\n'), nullptr) << "one sentence, no newline";
    EXPECT_EQ(std::string(b).rfind("soft mode cannot sample: ", 0), 0u) << b;
  }
  char small[16];
  EXPECT_EQ(refusal_message(EACCES, 3, small, sizeof small), sizeof small - 1);
  EXPECT_EQ(small[sizeof small - 1], '\0');
}

profile::SampleRecord at(uint64_t t) {
  profile::SampleRecord r{};
  r.time_ns = t;
  r.ip = 0x1000 + t;
  return r;
}

TEST(SoftSampleStore, OverflowIsRefusedNotBlocked) {
  SampleStore s;
  ASSERT_EQ(s.init(2 * SampleStore::kChunk), 0);
  SampleStore::Cursor a, b;
  uint32_t refused = 0;
  // Two threads' cursors interleave: each claims whole chunks.
  for (uint64_t i = 0; i < 3 * SampleStore::kChunk; ++i)
    if (!s.append(i % 2 ? a : b, at(3 * SampleStore::kChunk - i))) ++refused;
  EXPECT_EQ(s.count(), 2u * SampleStore::kChunk);
  EXPECT_EQ(refused, SampleStore::kChunk);
  // Still full afterwards: a new cursor gets nothing either.
  SampleStore::Cursor c;
  EXPECT_FALSE(s.append(c, at(1)));
  std::vector<profile::SampleRecord> out(s.count());
  ASSERT_EQ(s.export_sorted(out.data(), out.size()), out.size());
  for (size_t i = 1; i < out.size(); ++i) ASSERT_LE(out[i - 1].time_ns, out[i].time_ns);
  // A cap below the count copies only that many.
  EXPECT_EQ(s.export_sorted(out.data(), 10), 10u);
  s.release();
}

TEST(SoftSampleStore, ForgetAfterForkStartsEmpty) {
  SampleStore s;
  ASSERT_EQ(s.init(4 * SampleStore::kChunk), 0);
  SampleStore::Cursor a;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(s.append(a, at(uint64_t(i))));
  s.forget();
  EXPECT_EQ(s.count(), 0u);
  SampleStore::Cursor fresh;
  ASSERT_TRUE(s.append(fresh, at(7)));
  EXPECT_EQ(s.count(), 1u) << "a reused chunk does not bring back the parent's records";
  s.release();
}

TEST(SoftSampleStore, UninitialisedStoreRefuses) {
  SampleStore s;
  SampleStore::Cursor a;
  EXPECT_FALSE(s.append(a, at(1)));
  EXPECT_EQ(s.count(), 0u);
}

}  // namespace
}  // namespace whymiss::soft
