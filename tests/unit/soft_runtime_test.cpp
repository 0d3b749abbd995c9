// libwhymiss-soft.so in a real process (tests/unit/soft_runtime_helper.c): what a program sees
// of it and what the profile says when the environment is hostile (perf_event_open refused by
// seccomp, the program taking every signal whymiss could use, fork).
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "model/profile.h"
#include "runtime/pmu/plan.h"

namespace {

struct HelperRun {
  int status = -1;
  std::string out, err;
  // The run's temporary directory, removed with the last copy of the run (it held the
  // program's output and profile; the tests used to leave one in /tmp per run).
  std::shared_ptr<const std::string> dir;
  std::string profile_path;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs the helper with the runtime preloaded; `deny_perf` installs a seccomp filter that fails
// perf_event_open with EPERM first (as Docker's default profile does).
HelperRun run_helper(const char* mode, bool deny_perf, std::vector<std::string> env = {}) {
  char dir[] = "/tmp/whymiss-soft-rt-XXXXXX";
  if (!mkdtemp(dir)) return {};
  HelperRun r;
  r.dir = std::shared_ptr<const std::string>(new std::string(dir), [](const std::string* d) {
    std::error_code ec;
    std::filesystem::remove_all(*d, ec);
    delete d;
  });
  r.profile_path = std::string(dir) + "/p.data";
  const std::string out = std::string(dir) + "/out", err = std::string(dir) + "/err";
  pid_t pid = fork();
  if (pid == 0) {
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(o, 1);
    dup2(e, 2);
    if (deny_perf) {
      sock_filter f[] = {
          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      };
      sock_fprog prog{static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
          prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        _exit(126);
    }
    std::string pre = "LD_PRELOAD=" WHYMISS_SOFT_LIB, o_env = "WHYMISS_OUTPUT=" + r.profile_path;
    std::string pid_env = "WHYMISS_PID=" + std::to_string(getpid());
    env.insert(env.begin(), {pre, o_env, pid_env, "WHYMISS_PERIOD_US=200"});
    bool has_mode = false;
    for (const auto& kv : env) has_mode |= kv.rfind("WHYMISS_MODE=", 0) == 0;
    if (!has_mode) env.push_back("WHYMISS_MODE=soft");
    // These tests count samples; a trace window's samples are discarded (the thread is
    // stepping), so windows are off unless a test asks for them.
    bool has_trace = false;
    for (const auto& kv : env) has_trace |= kv.rfind("WHYMISS_TRACE=", 0) == 0;
    if (!has_trace) env.push_back("WHYMISS_TRACE=0");
    std::vector<char*> envp;
    for (auto& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    char* argv[] = {const_cast<char*>(WHYMISS_SOFT_HELPER), const_cast<char*>(mode), nullptr};
    execve(WHYMISS_SOFT_HELPER, argv, envp.data());
    _exit(127);
  }
  waitpid(pid, &r.status, 0);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

bool has_note(const whymiss::profile::Profile& p, const std::string& text) {
  for (const auto& n : p.notes)
    if (n.text.find(text) != std::string::npos) return true;
  return false;
}

TEST(SoftRuntime, SamplesAPlainProgram) {
  HelperRun r = run_helper("work", false);
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out << r.err;
  EXPECT_EQ(r.out, "ok work\n");
  EXPECT_EQ(r.err, "");
  auto p = whymiss::profile::read_profile(r.profile_path);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->meta.mode, uint32_t(whymiss::profile::Mode::Soft));
  EXPECT_EQ(p->meta.sample_source, uint32_t(whymiss::profile::SampleSource::TaskClock));
  EXPECT_EQ(p->meta.sample_period_ns, 200'000u);
  // Taken, not kept: how many samples land on a memory instruction depends on the loop's code
  // placement and the CPU's skid (on a Zen 4 guest one layout kept 280 of 1,350, another 75).
  EXPECT_GT(p->meta.samples, 1000u) << "300 ms of CPU at one sample per 200 us";
  EXPECT_GT(p->samples.size(), 20u);
  uint64_t discarded = 0;
  for (uint64_t d : p->meta.discarded) discarded += d;
  EXPECT_EQ(p->meta.samples, p->samples.size() + discarded) << "every sample taken is kept or counted";
  for (size_t i = 1; i < p->samples.size(); ++i) ASSERT_LE(p->samples[i - 1].time_ns, p->samples[i].time_ns);
  size_t on_heap = 0;
  for (const auto& s : p->samples) on_heap += s.object != 0;
  EXPECT_GT(on_heap, p->samples.size() / 2) << "the sweep's samples fall in its heap array";
  bool found = false;
  for (const auto& o : p->objects) found |= o.size == (size_t(1) << 18) * 8;
  EXPECT_TRUE(found) << "the sampled array is exported";
}

TEST(SoftRuntime, SeccompRefusalIsOneSentenceAndTheProgramRuns) {
  HelperRun r = run_helper("work", true);
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out << r.err;
  EXPECT_EQ(r.out, "ok work\n");
  EXPECT_NE(r.err.find("whymiss: soft mode cannot sample: perf_event_open was refused"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("seccomp"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  auto p = whymiss::profile::read_profile(r.profile_path);
  ASSERT_TRUE(p) << p.error();
  EXPECT_TRUE(has_note(*p, "perf_event_open was refused"));
  EXPECT_EQ(p->samples.size(), 0u);
  EXPECT_EQ(p->meta.sample_source, uint32_t(whymiss::profile::SampleSource::None));
}

TEST(SoftRuntime, ProgramTakingEverySignalKeepsItsHandlersAndSamplingGoesOn) {
  HelperRun r = run_helper("claim", false);
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out << r.err;
  EXPECT_EQ(r.out, "ok claim\n");
  auto p = whymiss::profile::read_profile(r.profile_path);
  ASSERT_TRUE(p) << p.error();
  EXPECT_GT(p->meta.samples, 1000u);  // taken (kept ones depend on code placement: above)
  EXPECT_TRUE(has_note(*p, "the program installed a handler for signal"));
}

TEST(SoftRuntime, ForkedChildRunsUnprofiledAndLeavesTheParentsProfile) {
  HelperRun r = run_helper("fork", false);
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out << r.err;
  EXPECT_EQ(r.out, "ok fork\n");
  auto p = whymiss::profile::read_profile(r.profile_path);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->meta.pid, uint64_t(p->meta.pid));
  EXPECT_EQ(p->threads.size(), 1u) << "only the parent's main thread";
  EXPECT_GT(p->meta.samples, 500u);  // taken (kept ones depend on code placement: above)
}

// pmu mode's live path on this machine: a plan in the PEBS sample format whose event is the
// software page-fault counter (as tests/unit/pmu_live_test.cpp does), so the kernel writes real
// records that the collector thread drains.
std::string page_fault_plan(uint32_t type) {
  using namespace whymiss::pmu;
  Plan p;
  p.backend = Backend::IntelPebs;
  p.event_count = 1;
  p.events[0].type = type;
  p.events[0].config = PERF_COUNT_SW_PAGE_FAULTS;
  p.events[0].role = Role::Loads;
  p.sample_type = kPebsSampleType;
  p.period = 1;
  return std::string(kPlanEnv) + "=" + plan_to_string(p);
}

TEST(SoftRuntime, PmuModeDrainsTheRingsOfItsPlan) {
  HelperRun r = run_helper("work", false, {"WHYMISS_MODE=pmu", page_fault_plan(PERF_TYPE_SOFTWARE)});
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out << r.err;
  auto p = whymiss::profile::read_profile(r.profile_path);
  ASSERT_TRUE(p) << p.error();
  ASSERT_EQ(p->meta.mode, uint32_t(whymiss::profile::Mode::Pmu));
  EXPECT_EQ(p->meta.sample_source, uint32_t(whymiss::profile::SampleSource::Pebs));
  // The helper's 2 MiB array faults in 512 pages, each a sample with the faulting address.
  size_t in_array = 0;
  for (const auto& s : p->samples) in_array += s.object != 0;
  EXPECT_GE(in_array, 256u);
}

TEST(SoftRuntime, PmuPlanThatDoesNotOpenFallsBackToSoft) {
  HelperRun r = run_helper("work", false, {"WHYMISS_MODE=pmu", page_fault_plan(0x7ffffff0)});
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out << r.err;
  EXPECT_EQ(r.out, "ok work\n");
  auto p = whymiss::profile::read_profile(r.profile_path);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->meta.mode, uint32_t(whymiss::profile::Mode::Soft));
  EXPECT_TRUE(has_note(*p, "fell back to soft sampling"));
  EXPECT_GT(p->meta.samples, 1000u);  // taken (kept ones depend on code placement: above)
}

TEST(SoftRuntime, TraceWindowsAreRecordedBesideTheSamples) {
  HelperRun r = run_helper("work", false, {"WHYMISS_TRACE=1"});
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out << r.err;
  auto p = whymiss::profile::read_profile(r.profile_path);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->meta.capture_backend, uint32_t(whymiss::profile::CaptureBackend::Trace));
  ASSERT_FALSE(p->traces.empty()) << "a run of 300 ms of CPU gets its first window 20-100 ms in";
  EXPECT_GE(p->trace_accesses.size(), 1000u);
  for (const auto& a : p->trace_accesses) ASSERT_LT(a.window, p->traces.size());
  uint64_t discarded = 0;
  for (uint64_t d : p->meta.discarded) discarded += d;
  EXPECT_EQ(p->meta.samples, p->samples.size() + discarded) << "samples during a window are counted too";
  EXPECT_GT(p->meta.discarded[uint32_t(whymiss::profile::DiscardReason::InRuntime)], 0u)
      << "a window's samples measure the stepping: counted as inside whymiss";
}

TEST(SoftRuntime, TheProgramChangingSigtrapWhileAThreadStepsNeitherDiesNorGetsOurTraps) {
  // Before SIGTRAP was reserved, SIG_IGN set by one thread while another stepped got the
  // process killed (the kernel resets an ignored synchronous SIGTRAP to the default), and a
  // handler of the program received every step.
  HelperRun r = run_helper("sigtrap", false, {"WHYMISS_TRACE=1"});
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ok sigtrap"), std::string::npos) << r.out;
  auto p = whymiss::profile::read_profile(r.profile_path);
  ASSERT_TRUE(p) << p.error();
  EXPECT_FALSE(p->traces.empty());
}

// The pthread mutex hooks (soft/lock_hooks.cpp): the program's results and error codes are
// libc's; the profile counts acquisitions and hand-overs (the program counted its own: the
// hooks' native count is of the same order), and the traced accesses of lock calls and critical
// sections carry their marks.
// The helper's mutex mode under `env`: its own counts (lock/unlock pairs, hand-overs) and the
// profile, which must hold one lock record. Fails the test (p empty) otherwise.
struct MutexRun {
  long count = 0, own = 0;
  std::optional<whymiss::profile::Profile> p;
};
MutexRun run_mutex(std::vector<std::string> env) {
  MutexRun m;
  HelperRun r = run_helper("mutex", false, std::move(env));
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out << r.err;
  if (std::sscanf(r.out.c_str(), "ok mutex %ld handovers=%ld", &m.count, &m.own) != 2) {
    ADD_FAILURE() << r.out;
    return m;
  }
  auto p = whymiss::profile::read_profile(r.profile_path);
  if (!p) {
    ADD_FAILURE() << p.error();
    return m;
  }
  EXPECT_EQ(p->locks.size(), 1u);
  if (p->locks.size() == 1) m.p = std::move(*p);
  return m;
}

TEST(SoftRuntime, MutexHooksCountHandOversAndMarkTracedCriticalSections) {
  MutexRun m = run_mutex({"WHYMISS_TRACE=1"});
  ASSERT_TRUE(m.p);
  const auto& p = m.p;
  const long count = m.count, own = m.own;
  const auto& l = p->locks[0];
  // Tenures are counted while a thread steps or in native accounting periods (the collector's
  // second tick, then one in 32): some, not all.
  EXPECT_GT(l.native_acquisitions, 0u);
  EXPECT_LT(l.native_acquisitions + l.traced_acquisitions + l.untracked, uint64_t(count));
  EXPECT_LE(l.native_handovers + l.traced_handovers, uint64_t(own));
  ASSERT_FALSE(p->traces.empty()) << "a run of 400 ms of CPU gets its first window 20-100 ms in";
  uint64_t in_call = 0, held = 0;
  for (const auto& a : p->trace_accesses) {
    in_call += (a.marks & whymiss::profile::kTraceInLockCall) != 0;
    held += (a.marks & whymiss::profile::kTraceLockHeld) != 0;
  }
  EXPECT_GT(in_call, 0u);
  EXPECT_GT(held, 0u) << "the counter's increments are traced with the mutex held";
  EXPECT_GT(l.traced_acquisitions, 0u);
}

// The same program with a native accounting period at every collector tick outside epochs: the
// hooks' accounting path (marks, held list, last-releaser table) runs for most calls, and the
// program still sees libc's results (the helper checks an error-checking mutex's EPERM for a
// foreign unlock and that a successful unlock keeps errno).
TEST(SoftRuntime, MutexHooksAccountingEveryCallKeepsLibcsResults) {
  MutexRun m = run_mutex({"WHYMISS_TRACE=1", "WHYMISS_LOCK_PERIOD_TICKS=1"});
  ASSERT_TRUE(m.p);
  const long count = m.count, own = m.own;
  const auto& l = m.p->locks[0];
  const uint64_t seen = l.native_acquisitions + l.traced_acquisitions + l.untracked;
  // Default periods account ~3 % of the calls; here everything outside epochs (their windows
  // take ~5 % of the time, their epochs a little more).
  EXPECT_GT(seen, uint64_t(count) / 2) << "accounted " << seen << " of " << count;
  EXPECT_LE(seen, uint64_t(count) + 1);  // + the error-checking mutex's one tenure
  EXPECT_LE(l.native_handovers, l.native_acquisitions);
  EXPECT_LE(l.native_handovers + l.traced_handovers, uint64_t(own));
}

TEST(SoftRuntime, PmuModeWithoutAPlanFallsBackToSoft) {
  HelperRun r = run_helper("work", false, {"WHYMISS_MODE=pmu", "WHYMISS_PMU_PLAN=garbage"});
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.out << r.err;
  auto p = whymiss::profile::read_profile(r.profile_path);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->meta.mode, uint32_t(whymiss::profile::Mode::Soft));
  EXPECT_TRUE(has_note(*p, "fell back to soft sampling"));
  EXPECT_GT(p->meta.samples, 1000u);  // taken (kept ones depend on code placement: above)
}

}  // namespace
