// Full-trace windows (runtime/soft/trace.h) for real: the trap flag single-steps on every x86-64
// Linux, KVM and Firecracker guests alike, so nothing is emulated. A window is started the way
// the runtime starts one, from a signal handler (here SIGUSR1 sent with a raw tgkill, so that no
// libc code changes the signal mask after it), and the code under test runs inside it.
#include <gtest/gtest.h>
#include <asm/prctl.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "model/profile.h"
#include "runtime/soft/decode.h"
#include "runtime/soft/trace.h"

namespace whymiss::soft {
namespace {

uint64_t mono() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool g_started = false;
void on_usr1(int, siginfo_t*, void* ctx) {
  uint64_t fs = 0;
  syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
  g_started = trace::start_here(static_cast<ucontext_t*>(ctx), 7, fs, 0);
}

class SoftTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(soft::init(1 << 20));
    struct sigaction sa {};
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &sa, nullptr);
  }
  // A fresh store and one open epoch, then a window on this thread.
  bool start(uint32_t steps, uint32_t target_lines = 0, uint32_t max_steps = 0, bool runs = true) {
    trace::Config c;
    c.runs = runs;
    c.steps = steps;
    c.target_lines = target_lines;
    c.max_steps = max_steps;
    c.mean_gap_ns = 0;
    c.first_min_ns = c.first_max_ns = 0;
    c.epoch_ns = uint64_t(60) * 1000000000;  // open until the test's own signal, however late
    c.budget_permille = 1000;
    c.max_accesses = 1 << 16;
    c.spill_fd = spill_fd;
    EXPECT_EQ(trace::init(c, nullptr, 0, 0), 0);
    const uint64_t t = mono();
    trace::tick(t);
    trace::tick(t + 1000);
    g_started = false;
    syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR1);
    return g_started;
  }
  std::vector<profile::TraceAccessRecord> accesses(std::vector<uint64_t>* times = nullptr) {
    std::vector<profile::TraceAccessRecord> v(trace::access_count());
    if (times) times->assign(v.size(), 0);
    v.resize(trace::export_accesses(v.data(), times ? times->data() : nullptr, v.size()));
    if (times) times->resize(v.size());
    return v;
  }
  int spill_fd = -1;  // Config::spill_fd of the next start()
  std::vector<profile::TraceRecord> windows() {
    std::vector<profile::TraceRecord> v(trace::window_count());
    v.resize(trace::export_windows(v.data(), v.size()));
    return v;
  }
};

__attribute__((noinline)) void fill(volatile uint64_t* a, int n) {
  for (int i = 0; i < n; ++i) a[i] = uint64_t(i);
}

// p = *p, n times, as `mov (reg),reg`: the load overwrites its own address register, which is
// why a sample taken after it cannot tell where it read.
__attribute__((noinline)) void* chase(void* p, long n) {
  asm volatile("1: mov (%0), %0\n\tdec %1\n\tjnz 1b" : "+r"(p), "+r"(n) : : "memory", "cc");
  return p;
}

// a[0] = i; getpid as a raw system call; a[1] = i.
__attribute__((noinline)) void store_around_syscall(volatile uint64_t* a, int n) {
  for (int i = 0; i < n; ++i) {
    a[0] = uint64_t(i);
    long r;
    asm volatile("syscall" : "=a"(r) : "a"(long(SYS_getpid)) : "rcx", "r11", "memory");
    a[1] = uint64_t(i);
  }
}

// The first access recorded after a stepped-over system call is marked (the replay pauses the
// thread by the time the call took), and only that one.
TEST_F(SoftTrace, TheAccessAfterASystemCallIsMarked) {
  static volatile uint64_t a[2];
  ASSERT_TRUE(start(3000));
  for (int rounds = 0; trace::tracing() && rounds < 1000; ++rounds) store_around_syscall(a, 50);
  trace::stop();
  size_t before = 0, after = 0;
  for (const auto& r : accesses()) {
    if (r.addr == uint64_t(&a[0])) {
      ++before;
      EXPECT_EQ(r.marks, 0) << "a[0] follows no system call in its iteration";
    } else if (r.addr == uint64_t(&a[1])) {
      ++after;
      EXPECT_EQ(r.marks, profile::kTraceAfterSyscall);
    }
  }
  EXPECT_GE(before, 50u);
  EXPECT_GE(after, 50u);
}

TEST_F(SoftTrace, RecordsEveryStoreOfALoopInProgramOrder) {
  static volatile uint64_t a[256];
  ASSERT_TRUE(start(4000));
  for (int rounds = 0; trace::tracing() && rounds < 1000; ++rounds) fill(a, 256);
  trace::stop();
  EXPECT_FALSE(trace::tracing());
  std::vector<uint64_t> seq, times;
  const auto recs = accesses(&times);
  ASSERT_EQ(times.size(), recs.size());
  const uint64_t opened = windows().at(0).start_ns;
  for (size_t i = 0; i < recs.size(); ++i) {  // when each ran: within the window, in order
    EXPECT_GE(times[i], opened) << i;
    if (i) EXPECT_GE(times[i], times[i - 1]) << i;
  }
  for (const auto& r : recs)
    if (r.addr >= uint64_t(&a[0]) && r.addr < uint64_t(&a[256])) {
      EXPECT_EQ(r.size, 8);
      EXPECT_EQ(r.flags, profile::kAccessWrite);
      seq.push_back((r.addr - uint64_t(&a[0])) / 8);
    }
  ASSERT_GE(seq.size(), 300u);  // more than one full round of the loop
  for (size_t i = 1; i < seq.size(); ++i) EXPECT_TRUE(seq[i] == seq[i - 1] + 1 || seq[i] == 0) << i;
  auto w = windows();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].thread, 7u);
  EXPECT_EQ(w[0].steps, 4000u);
  EXPECT_EQ(w[0].end, uint32_t(profile::TraceEnd::Done));
}

// With a spill file, the collector's ticks move every full chunk of a window still being
// stepped to the file and give it back to the pool; export merges the file and what is still in
// memory (the window's last, partly filled chunk) into the one program order. Single-stepped
// (no runs), so that no breakpoint is involved while another thread ticks.
TEST_F(SoftTrace, ChunksSpilledWhileAWindowStepsExportInProgramOrderWithTheRest) {
  static volatile uint64_t a[256];
  spill_fd = int(syscall(SYS_memfd_create, "spill", 1u /* MFD_CLOEXEC */));
  ASSERT_GE(spill_fd, 0);
  std::atomic<bool> go{false}, done{false};
  std::thread collector([&] {  // created first: a clone ends a window (Syscall)
    while (!done.load()) {
      if (go.load()) trace::tick(mono());
      timespec ts{0, 1000000};
      nanosleep(&ts, nullptr);
    }
  });
  const bool started = start(16000, 0, 0, /*runs=*/false);
  go = true;
  if (!started) {
    done = true;
    collector.join();
    FAIL() << "no window";
  }
  for (int rounds = 0; trace::tracing() && rounds < 1000; ++rounds) fill(a, 256);
  done = true;
  collector.join();
  const trace::Stats st = trace::stats();
  trace::stop();
  std::vector<uint64_t> times;
  const auto recs = accesses(&times);
  // 12,000 steps of fill() store ~3,000 times: at least one full chunk (2,048) went to the file,
  // the last, partly filled one did not (no tick after the window ended may have come).
  ASSERT_GE(recs.size(), 2500u) << "window ended " << windows().at(0).end << " after " << windows().at(0).steps << " steps";
  EXPECT_GE(st.spilled, 2048u);
  EXPECT_LE(st.spilled, recs.size());  // the last chunk too if a tick came after the window ended
  EXPECT_EQ(st.spill_errno, 0u);
  struct stat fst {};
  ASSERT_EQ(fstat(spill_fd, &fst), 0);
  EXPECT_EQ(uint64_t(fst.st_size), st.spilled * (sizeof(profile::TraceAccessRecord) + sizeof(uint64_t)));
  std::vector<uint64_t> seq;
  for (size_t i = 0; i < recs.size(); ++i) {
    if (i) EXPECT_GE(times[i], times[i - 1]) << i;
    if (recs[i].addr >= uint64_t(&a[0]) && recs[i].addr < uint64_t(&a[256]))
      seq.push_back((recs[i].addr - uint64_t(&a[0])) / 8);
  }
  ASSERT_GE(seq.size(), 2500u);
  size_t breaks = 0;
  for (size_t i = 1; i < seq.size(); ++i)
    if (!(seq[i] == seq[i - 1] + 1 || (seq[i] == 0 && seq[i - 1] == 255))) ++breaks;
  EXPECT_EQ(breaks, 0u) << "a chunk out of place, lost or repeated";
  EXPECT_EQ(windows().at(0).accesses, recs.size());
  close(spill_fd);
  spill_fd = -1;
}

// A program may close the spill file's descriptor and open something else under its number:
// that file is never written (nor read back); the accesses that went to the spill file are left
// out of the export and the stats say why.
TEST_F(SoftTrace, AFileTheProgramPutUnderTheSpillDescriptorIsNeverWritten) {
  static volatile uint64_t a[256];
  spill_fd = int(syscall(SYS_memfd_create, "spill", 1u));
  const int other = int(syscall(SYS_memfd_create, "program", 1u));
  ASSERT_GE(spill_fd, 0);
  ASSERT_GE(other, 0);
  ASSERT_TRUE(start(16000, 0, 0, /*runs=*/false));
  for (int rounds = 0; trace::tracing() && rounds < 1000; ++rounds) fill(a, 256);
  const size_t all = trace::access_count();
  ASSERT_GE(all, 2500u);
  ASSERT_EQ(dup2(other, spill_fd), spill_fd);  // the program's file under the spill file's number
  trace::tick(mono());
  struct stat fst {};
  ASSERT_EQ(fstat(other, &fst), 0);
  EXPECT_EQ(fst.st_size, 0) << "whymiss wrote into the program's file";
  EXPECT_EQ(trace::stats().spill_errno, uint64_t(EBADF));
  trace::stop();
  EXPECT_EQ(accesses().size(), all) << "nothing was spilled yet: everything is exported from memory";
  close(other);
  close(spill_fd);
  spill_fd = -1;
}

// The same with a file the program creates in the spill file's directory after closing its
// descriptor: on ext4 it gets the number and, often, the inode the unnamed file freed. It has a
// name, so it is not the spill file: nothing is read back from it (the spilled accesses are left
// out, and the stats say why) and it keeps its bytes.
TEST_F(SoftTrace, AFileTheProgramCreatesWhereTheSpillFileWasIsNeitherReadNorWritten) {
  static volatile uint64_t a[256];
  char dir[] = "/tmp/whymiss-spill-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  spill_fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
  if (spill_fd < 0) {
    rmdir(dir);
    GTEST_SKIP() << "no O_TMPFILE in /tmp (errno " << errno << ")";
  }
  ASSERT_TRUE(start(8000, 0, 0, /*runs=*/false));
  for (int rounds = 0; trace::tracing() && rounds < 1000; ++rounds) fill(a, 256);
  const size_t all = trace::access_count();
  ASSERT_GE(all, 1000u);
  trace::tick(mono());  // the window ended: all of it goes to the file
  ASSERT_EQ(trace::stats().spilled, all);
  close(spill_fd);
  const std::string name = std::string(dir) + "/prog.out";
  int prog = open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(prog, 0);
  if (prog != spill_fd) {  // (another thread of the test binary took the number)
    ASSERT_EQ(dup2(prog, spill_fd), spill_fd);
    close(prog);
    prog = spill_fd;
  }
  const std::vector<uint8_t> content(1 << 20, 0xAB);
  ASSERT_EQ(pwrite(prog, content.data(), content.size(), 0), ssize_t(content.size()));
  trace::tick(mono());
  trace::stop();
  EXPECT_TRUE(accesses().empty()) << "records read back from the program's file";
  EXPECT_EQ(trace::stats().spill_errno, uint64_t(EBADF));
  struct stat fst {};
  ASSERT_EQ(fstat(prog, &fst), 0);
  EXPECT_EQ(fst.st_size, off_t(content.size()));
  std::vector<uint8_t> back(content.size());
  ASSERT_EQ(pread(prog, back.data(), back.size(), 0), ssize_t(back.size()));
  EXPECT_TRUE(back == content);
  close(prog);
  spill_fd = -1;
  unlink(name.c_str());
  rmdir(dir);
}

__attribute__((noinline)) void touch_lines(volatile uint8_t* p, size_t lines) {
  for (size_t i = 0; i < lines; ++i) p[i * 64] = 1;
}

TEST_F(SoftTrace, AWindowGoesOnWhileItsFootprintGrowsTowardsItsTarget) {
  static volatile uint64_t a[16];
  static volatile uint8_t big[4 << 20];
  // 16 words: the footprint stops growing at once, so the window ends after its steps.
  ASSERT_TRUE(start(2000, 1000, 5000));
  while (trace::tracing()) fill(a, 16);
  trace::stop();
  auto w = windows();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].steps, 2000u);
  EXPECT_EQ(w[0].end, uint32_t(profile::TraceEnd::Done));
  // A few new lines per round: still growing at every stretch, far from 1,000 lines: the cap.
  ASSERT_TRUE(start(2000, 1000, 5000));
  // (8 lines per round: ~30 new lines per stretch of 500 steps against the 16 needed; with 4,
  // sketch collisions at some addresses left a stretch short about once in 150 runs.)
  for (size_t off = 0; trace::tracing() && off + 64 * 8 <= sizeof big; off += 64 * 8) {
    touch_lines(big + off, 8);
    fill(a, 16);
  }
  trace::stop();
  w = windows();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].steps, 5000u);
  // A new line per store: 1,000 lines well before the cap.
  ASSERT_TRUE(start(2000, 1000, 50000));
  for (size_t off = 0; trace::tracing() && off + 64 * 256 <= sizeof big; off += 64 * 256) touch_lines(big + off, 256);
  trace::stop();
  w = windows();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_GE(w[0].steps, 2000u);
  EXPECT_LT(w[0].steps, 20000u);  // ~4 steps per line: ends soon after ~1,000 lines
}

TEST_F(SoftTrace, APointerChaseIsRecordedWithTheAddressItsLoadOverwrites) {
  constexpr int kNodes = 64;
  static void* node[kNodes][8];  // a node per 64 bytes; word 0 points to the next node
  std::vector<int> order(kNodes);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin() + 1, order.end(), std::mt19937(5));
  for (int i = 0; i < kNodes; ++i) node[order[size_t(i)]][0] = &node[order[size_t((i + 1) % kNodes)]][0];
  ASSERT_TRUE(start(3000));
  while (trace::tracing()) chase(&node[0][0], 200);
  trace::stop();
  std::vector<uint64_t> seq;
  for (const auto& r : accesses())
    if (r.addr >= uint64_t(&node[0][0]) && r.addr < uint64_t(&node[kNodes][0])) seq.push_back(r.addr);
  ASSERT_GE(seq.size(), 200u);
  for (size_t i = 1; i < seq.size(); ++i)
    if (seq[i] != uint64_t(&node[0][0]))  // each call starts over at the head
      EXPECT_EQ(seq[i], uint64_t(*reinterpret_cast<void**>(seq[i - 1]))) << i;
}

TEST_F(SoftTrace, SteppingGoesOnThroughAPlainSystemCall) {
  static volatile uint64_t a[16];
  ASSERT_TRUE(start(5000));
  fill(a, 16);
  syscall(SYS_getppid);
  const bool still = trace::tracing();
  fill(a, 16);
  trace::stop();
  EXPECT_TRUE(still);
  int stores = 0;
  for (const auto& r : accesses()) stores += r.addr >= uint64_t(&a[0]) && r.addr < uint64_t(&a[16]);
  EXPECT_EQ(stores, 32);
}

// getppid by a raw `syscall`, and a store right after it: the kernel returns with IRET and the
// step's trap comes only after that store ran.
__attribute__((noinline)) void store_after_syscall(volatile uint64_t* p) {
  asm volatile("mov %1, %%eax\n\tsyscall\n\tmov %%rax, (%0)" : : "r"(p), "i"(SYS_getppid)
               : "rax", "rcx", "r11", "memory");
}

TEST_F(SoftTrace, TheInstructionAfterASteppedSystemCallIsRecorded) {
  static volatile uint64_t word;
  ASSERT_TRUE(start(5000));
  store_after_syscall(&word);
  store_after_syscall(&word);
  trace::stop();
  int stores = 0;
  for (const auto& r : accesses())
    if (r.addr == uint64_t(&word)) {
      EXPECT_EQ(r.flags, profile::kAccessWrite);
      ++stores;
    }
  EXPECT_EQ(stores, 2);
}

TEST_F(SoftTrace, AWindowWhoseThreadLostItsTrapFlagEndsAtTheNextSample) {
  // A handler of the program that leaves by siglongjmp never restores the TF the kernel saved:
  // the next sample sees a context without it.
  ASSERT_TRUE(start(100000));
  ucontext_t uc;
  std::memset(&uc, 0, sizeof uc);
  trace::check_lost(&uc);
  EXPECT_FALSE(trace::tracing());
  trace::stop();
  auto w = windows();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].end, uint32_t(profile::TraceEnd::Lost));
}

TEST_F(SoftTrace, BlockingSigtrapEndsTheWindowBeforeTheCallAndTheThreadLivesOn) {
  ASSERT_TRUE(start(100000));
  sigset_t s, old;
  sigemptyset(&s);
  sigaddset(&s, SIGTRAP);
  pthread_sigmask(SIG_BLOCK, &s, &old);  // stepped into with TF set, the next trap would kill us
  const bool still = trace::tracing();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  trace::stop();
  EXPECT_FALSE(still);
  auto w = windows();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].end, uint32_t(profile::TraceEnd::Syscall));
  EXPECT_LT(w[0].steps, 100000u);
}

TEST_F(SoftTrace, NoWindowStartsWhileTheThreadBlocksSigtrap) {
  sigset_t s, old;
  sigemptyset(&s);
  sigaddset(&s, SIGTRAP);
  pthread_sigmask(SIG_BLOCK, &s, &old);
  const bool started = start(1000);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  trace::stop();
  EXPECT_FALSE(started);
  EXPECT_TRUE(windows().empty());
}

TEST_F(SoftTrace, OneWindowPerThreadAndEpoch) {
  ASSERT_TRUE(start(200));
  while (trace::tracing()) {
  }
  g_started = true;
  syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR1);  // same epoch: no second window
  EXPECT_FALSE(g_started);
  trace::stop();
  EXPECT_EQ(windows().size(), 1u);
}

// The mutex hooks' hand-over accounting (trace.h): within one native accounting period, a
// release whose mutex was last released by another thread is a hand-over; a mutex's first
// release in a period has no known previous holder; outside a period nothing is counted.
TEST(SoftTraceLocks, ReleasesByAnotherThreadAreHandOvers) {
  profile::LockInfoRecord before{}, after{};
  trace::export_locks(&before);
  int m1 = 0, m2 = 0;  // any addresses: the table keys on them
  auto release_on_other_thread = [](const void* m) {
    std::thread t([m] { trace::lock_releasing(m); });
    t.join();
  };
  static uint32_t round = 0;  // fresh period numbers on every repetition of the test
  const uint32_t first = 100 + 2 * round++;
  trace::g_lock_period.store(first);
  trace::lock_releasing(&m1);          // first in the period: untracked
  trace::lock_releasing(&m1);          // same thread again: no hand-over
  release_on_other_thread(&m1);        // hand-over
  trace::lock_releasing(&m1);          // hand-over back
  trace::lock_releasing(&m2);          // another mutex: untracked
  trace::g_lock_period.store(first + 1);  // a new period: the table's entries are stale
  trace::lock_releasing(&m1);          // untracked
  release_on_other_thread(&m1);        // hand-over
  trace::g_lock_period.store(0);
  ASSERT_TRUE(trace::export_locks(&after));
  EXPECT_EQ(after.native_acquisitions - before.native_acquisitions, 4u);
  EXPECT_EQ(after.native_handovers - before.native_handovers, 3u);
  EXPECT_EQ(after.untracked - before.untracked, 3u);
  EXPECT_EQ(after.traced_acquisitions, before.traced_acquisitions);
  EXPECT_FALSE(trace::lock_accounted());  // no period, not stepping: the hooks pass through
}

TEST_F(SoftTrace, ASigtrapThatIsNotASteppingTrapGetsTheDefaultAction) {
  ASSERT_TRUE(start(100));
  while (trace::tracing()) {
  }
  trace::stop();
  pid_t child = fork();
  if (child == 0) {
    kill(getpid(), SIGTRAP);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTRAP);
}

// A mix of what runs must handle: loops (jcc), direct calls and returns, a pointer chase (the
// next address comes from the load before), pushes and pops, a rep string op (single-stepped)
// and a plain system call.
struct Node {
  Node* next;
  uint64_t pad[7];
};
__attribute__((noinline)) uint64_t leaf(volatile uint64_t* a, int i) {
  const uint64_t v = a[i & 63] + uint64_t(i);
  a[i & 63] = v;
  return v;
}
__attribute__((noinline)) uint64_t mixed(volatile uint64_t* a, Node* head, uint8_t* dst, const uint8_t* src) {
  uint64_t sum = 0;
  for (int i = 0; i < 64; ++i) sum += leaf(a, i * 7);
  for (Node* n = head; n; n = n->next) sum += n->pad[1];
  size_t len = 100;
  asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(len) : : "memory");
  sum += uint64_t(syscall(SYS_getuid)) & 1;  // the same in a forked child
  for (int i = 0; i < 32; ++i) a[(i * 5) & 63] = a[(i * 5) & 63] ^ sum;
  return sum;
}

struct Mixed {
  uint64_t a[64] = {};
  Node nodes[40] = {};
  uint8_t src[128] = {}, dst[128] = {};
  Node* head = nullptr;
  Mixed() {  // a list through the nodes in the order 0, 17, 34, 11, ... (17 is prime to 40)
    for (int i = 0; i < 40; ++i) nodes[i * 17 % 40].next = i + 1 < 40 ? &nodes[(i + 1) * 17 % 40] : nullptr;
    for (int i = 0; i < 40; ++i) nodes[i].pad[1] = uint64_t(i);
    head = &nodes[0];
  }
  uint64_t run() { return mixed(a, head, dst, src); }
};

struct Rec {
  uint64_t ip, addr;
  uint16_t size;
  uint8_t flags;
  bool operator==(const Rec& o) const { return ip == o.ip && addr == o.addr && size == o.size && flags == o.flags; }
};

// The stream runs record equals the one single-stepping records, instruction for instruction,
// with a fraction of the traps.
TEST_F(SoftTrace, RunsRecordWhatSingleSteppingRecordsWithFewerTraps) {
  static Mixed m;
  std::vector<Rec> streams[2];
  trace::Stats st[2];
  for (int runs = 0; runs < 2; ++runs) {
    m = Mixed();
    ASSERT_TRUE(start(20000, 0, 0, runs == 1));
    for (int rounds = 0; trace::tracing() && rounds < 100; ++rounds) m.run();
    trace::stop();
    st[runs] = trace::stats();
    for (const auto& r : accesses())
      streams[runs].push_back({r.ip, r.addr, r.size, r.flags});
    auto w = windows();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].steps, 20000u);
    EXPECT_EQ(w[0].end, uint32_t(profile::TraceEnd::Done));
  }
  ASSERT_GT(streams[0].size(), 5000u);
  ASSERT_EQ(streams[0].size(), streams[1].size());
  for (size_t i = 0; i < streams[0].size(); ++i)
    ASSERT_TRUE(streams[0][i] == streams[1][i]) << "access " << i << ": ip " << std::hex << streams[0][i].ip
                                                << " vs " << streams[1][i].ip;
  EXPECT_EQ(st[0].run_traps, 0u);
  EXPECT_GT(st[1].run_traps, 0u);
  EXPECT_GT(st[1].breakpoints_armed, 0u);
  // Single steps: the rep string's iterations, the system call, and stretches that cannot end
  // at a breakpoint; far fewer than the 20,000 instructions.
  EXPECT_LT(st[1].single_steps + st[1].run_traps, 20000u / 3) << st[1].single_steps << " single, " << st[1].run_traps << " runs of " << st[1].run_steps;
}

// Breakpoints are taken for threads outside windows (the result is the program's), and gone,
// with the code bytes as they were, once the windows stop.
TEST_F(SoftTrace, BreakpointsAreTakenOutsideWindowsAndGoWithStop) {
  static Mixed m;
  const auto* code = reinterpret_cast<const uint8_t*>(&mixed);
  std::vector<uint8_t> before(code, code + 256);
  m = Mixed();
  const uint64_t expect = m.run();
  m = Mixed();
  ASSERT_TRUE(start(3000));
  while (trace::tracing()) m.run();
  const uint32_t live = trace::stats().breakpoints_armed;
  EXPECT_GT(live, 0u);
  uint64_t other = 0;
  static Mixed m2;
  std::thread t([&] { m2 = Mixed(); other = m2.run(); });  // meets the breakpoints, no window
  t.join();
  EXPECT_EQ(other, expect);
  pid_t child = fork();  // inherits the breakpoints
  if (child == 0) {
    static Mixed m3;
    _exit(m3.run() == expect ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << std::hex << status;
  trace::stop();
  EXPECT_EQ(std::vector<uint8_t>(code, code + 256), before);
}

// Breakpoints come and go (each epoch's windows arm them, the collector's tick removes them)
// while another thread runs the same code outside every window: it must always compute what
// the program computes, however its traps interleave with removals and re-arming.
TEST_F(SoftTrace, AThreadOutsideWindowsSurvivesBreakpointsComingAndGoing) {
  static Mixed m, m2;
  m2 = Mixed();
  const uint64_t expect = m2.run();
  ASSERT_TRUE(start(2000));
  std::atomic<bool> done{false};
  std::atomic<uint64_t> runs{0}, wrong{0};
  std::thread t([&] {
    static Mixed mine;
    while (!done.load()) {
      mine = Mixed();
      if (mine.run() != expect) wrong.fetch_add(1);
      runs.fetch_add(1);
    }
  });
  uint64_t now = mono();
  uint32_t windows_started = 1;
  for (int round = 0; round < 40; ++round) {
    while (trace::tracing()) m.run();
    now += uint64_t(61) * 1000000000;  // past the epoch (60 s) and its hold: breakpoints go
    trace::tick(now);
    trace::tick(now + 1000);  // a new epoch
    g_started = false;
    syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR1);
    windows_started += g_started;
  }
  while (trace::tracing()) m.run();
  done = true;
  t.join();
  trace::stop();
  EXPECT_GT(windows_started, 30u);
  EXPECT_GT(trace::stats().breakpoints_armed, 40u);
  EXPECT_GT(runs.load(), 10u);
  EXPECT_EQ(wrong.load(), 0u);
}

TEST_F(SoftTrace, InitRefusesWhenTheProgramOwnsSigtrap) {
  struct sigaction mine {}, old {};
  mine.sa_handler = [](int) {};
  ASSERT_EQ(trace::init(trace::Config{}, nullptr, 0, 0), 0);  // ours: fine to re-init
  sigaction(SIGTRAP, &mine, &old);
  EXPECT_EQ(trace::init(trace::Config{}, nullptr, 0, 0), EBUSY);
  sigaction(SIGTRAP, &old, nullptr);
}

}  // namespace
}  // namespace whymiss::soft
