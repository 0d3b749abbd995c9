// `whymiss record` and `whymiss run` around a real instrumented process: signals sent to whymiss,
// a program that changes directory or drops privileges, and why a profile is missing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/profile.h"

namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    char t[] = "/tmp/whymiss-record-XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& n) const { return (fs::path(path) / n).string(); }
  std::vector<std::string> entries() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(path)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }
  std::string path;
};

// whymiss running: its pid, the read end of its (and the program's) standard output, and the
// file its standard error goes to.
struct Whymiss {
  pid_t pid = -1;
  int out = -1;
  std::string err_path;
  ~Whymiss() {
    if (out >= 0) close(out);
  }
};

// as_limit: RLIMIT_AS for whymiss and the program (0 = unchanged).
Whymiss start(const std::vector<std::string>& args, const std::string& cwd, uint64_t as_limit = 0) {
  Whymiss w;
  w.err_path = cwd + "/../" + fs::path(cwd).filename().string() + ".stderr";
  int fds[2];
  if (pipe(fds) != 0) return w;
  w.pid = fork();
  if (w.pid == 0) {
    close(fds[0]);
    dup2(fds[1], 1);
    int e = open(w.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(e, 2);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);  // (SIGQUIT's default action dumps core)
    if (as_limit) {
      const rlimit as{rlim_t(as_limit), rlim_t(as_limit)};
      if (setrlimit(RLIMIT_AS, &as) != 0) _exit(125);
    }
    if (chdir(cwd.c_str()) != 0) _exit(126);
    std::vector<char*> argv{const_cast<char*>(WHYMISS_BIN)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  w.out = fds[0];
  return w;
}

// Reads standard output until `fragment` appears, end of file, or 60 s pass.
std::string read_until(int fd, const std::string& fragment) {
  std::string got;
  char buf[256];
  while (got.find(fragment) == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 60000) <= 0) break;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, size_t(n));
  }
  return got;
}

// Whether the pipe reaches end of file (every process holding it exited) within 60 s.
bool reaches_eof(int fd) {
  char buf[256];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 60000) <= 0) return false;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) return true;
    if (n < 0) return false;
  }
}

int wait_status(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Runs whymiss to the end in `cwd`; returns its exit status, and its stderr in *err.
int run(const std::vector<std::string>& args, const std::string& cwd, std::string* err,
        uint64_t as_limit = 0) {
  Whymiss w = start(args, cwd, as_limit);
  reaches_eof(w.out);
  int st = wait_status(w.pid);
  *err = slurp(w.err_path);
  unlink(w.err_path.c_str());
  return st;
}

// #5: a terminating signal sent to whymiss (timeout, kill, a closed terminal) reaches the
// program, whose profile is kept; nothing else is left in the directory.
TEST(Record, TerminatingSignalsReachTheProgramAndTheProfileIsKept) {
  for (int sig : {SIGTERM, SIGHUP, SIGQUIT}) {
    TempDir dir;
    Whymiss w = start({"record", "-o", dir.file("p.data"), "--", WHYMISS_TRUST_PROG, "wait"}, dir.path);
    const std::string ready = read_until(w.out, "\n");
    ASSERT_NE(ready.find("ready"), std::string::npos);
    const pid_t program = pid_t(std::atol(ready.c_str() + 6));
    ASSERT_EQ(kill(w.pid, sig), 0);
    // whymiss exits as the program did: killed by the signal (128 + its number).
    EXPECT_EQ(wait_status(w.pid), 128 + sig) << strsignal(sig) << ": " << slurp(w.err_path);
    // A whymiss that died of the signal left the program waiting: end it (an exited one holds
    // the pipe no more).
    if (!reaches_eof(w.out)) kill(program, SIGKILL);
    auto p = whymiss::profile::read_profile(dir.file("p.data"));
    ASSERT_TRUE(p) << p.error();
    EXPECT_EQ(p->meta.term_signal, sig);
    EXPECT_GT(p->meta.accesses, 0u);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"p.data"});
    unlink(w.err_path.c_str());
  }
}

// #5: whymiss killed outright (SIGKILL, which it cannot pass on) takes the program with it.
TEST(Record, ProgramDiesWithWhymiss) {
  TempDir dir;
  Whymiss w = start({"record", "-o", dir.file("p.data"), "--", WHYMISS_TRUST_PROG, "wait"}, dir.path);
  const std::string ready = read_until(w.out, "\n");
  ASSERT_NE(ready.find("ready"), std::string::npos);
  const pid_t program = pid_t(std::atol(ready.c_str() + 6));
  ASSERT_EQ(kill(w.pid, SIGKILL), 0);
  wait_status(w.pid);
  const bool ended = reaches_eof(w.out);  // the program held the pipe too
  if (!ended) kill(program, SIGKILL);
  EXPECT_TRUE(ended) << "the program outlived whymiss";
  unlink(w.err_path.c_str());
}

// #6: a relative -o (and the raw profile) is resolved before the program can change directory.
TEST(Record, RelativeOutputSurvivesAChdir) {
  TempDir dir, elsewhere;
  std::string err;
  EXPECT_EQ(run({"record", "-o", "p.data", "--", WHYMISS_TRUST_PROG, "chdir", elsewhere.path},
                dir.path, &err), 0) << err;
  EXPECT_TRUE(whymiss::profile::read_profile(dir.file("p.data")).ok());
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"p.data"});
  EXPECT_TRUE(elsewhere.entries().empty());
}

// #7 (and #2): `run` reports the profile it recorded, not whatever the output path holds
// afterwards (another run's profile, or here nothing readable: a device of the test's own).
TEST(Record, RunReportsTheProfileItRecorded) {
  TempDir dir;
  const std::string null = dir.file("null");
  ASSERT_EQ(mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << strerror(errno);
  std::string err;
  EXPECT_EQ(run({"run", "-o", null, "--", WHYMISS_TRUST_PROG, "chdir", "/"}, dir.path, &err), 0) << err;
  EXPECT_NE(err.find("trust_prog chdir /"), std::string::npos) << err;
  EXPECT_TRUE(fs::is_character_file(fs::symlink_status(null)));
}

// #8: when no profile appears, whymiss names the cause it can find.
TEST(Record, MissingProfileNamesTheCause) {
  TempDir dir;
  std::string err;
  EXPECT_EQ(run({"record", "-o", dir.file("p.data"), "--", WHYMISS_TRUST_PROG, "exec", "/bin/true"},
                dir.path, &err), 2);
  EXPECT_NE(err.find("exec'd a program not built with whymiss"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE(dir.entries().empty());
  if (geteuid() != 0) GTEST_SKIP() << "dropping privileges needs root";
  EXPECT_EQ(run({"record", "-o", dir.file("p.data"), "--", WHYMISS_TRUST_PROG, "setuid"}, dir.path, &err), 2);
  EXPECT_NE(err.find("(Permission denied); did the program drop its privileges?"), std::string::npos) << err;
  EXPECT_TRUE(dir.entries().empty());
}

// #11: a geometry the memory left cannot hold turns the runtime off at start, with a sentence;
// the program runs on to its own exit status. (It used to die of the simulator's bad_alloc.)
// 4.03 GiB: the level's 931 MiB (928 MiB and its per-core set counts); as exact mode
// simulates many cores and there is no shared level, the directory's table at 72 bytes a line
// (Hierarchy::directory_bytes): 16 Mi lines, 1,152 MiB; and parallel mode's (the default) inbox,
// two 32-byte messages a line, charged at 128 bytes: 2 GiB.
TEST(Record, GeometryTooBigForMemoryTurnsTheRuntimeOff) {
  TempDir dir;
  std::string err;
  EXPECT_EQ(run({"record", "-o", dir.file("p.data"), "--cache", "L1=1G:16:64", "--",
                 WHYMISS_TRUST_PROG, "threads", "2"},
                dir.path, &err, uint64_t(1536) << 20), 2);
  EXPECT_NE(err.find("the program exited with status 5 without leaving a profile: its runtime "
                     "turned itself off at start: simulating L1=1G:16:64 takes 4.03 GiB for the "
                     "first core, but only "), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE(dir.entries().empty());
}

// #11: threads whose simulated cores no longer fit run unrecorded; the program runs on to its own
// exit status, and the profile says which and why. (A thread's core used to be allocated on its
// first access, and a bad_alloc there aborted the program.)
TEST(Record, CoresPastTheMemoryLeftLeaveThreadsUnrecorded) {
  TempDir dir;
  std::string err;
  // ~58 MiB a core (a 64 MiB L1's tags and shadow): a few fit under 1.5 GiB of address space
  // (half of it the runtime's own heap reservation), not 17.
  ASSERT_EQ(run({"record", "-o", dir.file("p.data"), "--cache", "L1=64M:16:64", "--",
                 WHYMISS_TRUST_PROG, "threads", "16"},
                dir.path, &err, uint64_t(1536) << 20), 5) << err;  // the program's status
  auto p = whymiss::profile::read_profile(dir.file("p.data"));
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->meta.exit_code, 5);
  EXPECT_GT(p->meta.accesses, 0u);
  bool noted = false;
  for (const auto& n : p->notes)
    noted |= n.severity == 1 && n.text.find(" not recorded (") != std::string::npos &&
             n.text.find("a simulated core of L1=64M:16:64 takes ") != std::string::npos;
  EXPECT_TRUE(noted) << "no note on the threads left out";
  EXPECT_LT(p->threads.size(), 17u);
  EXPECT_GE(p->threads.size(), 1u);
}

}  // namespace

namespace {

// Sets an environment variable for the scope of a test.
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// Issue #18 item 7: `record` and `run` exit as the program did (its status, 128 + the signal
// that killed it), as `time` and valgrind do; whymiss's own failures keep status 2.
TEST(Record, ExitStatusIsTheProgramsOwn) {
  for (const char* cmd : {"record", "run"}) {
    SCOPED_TRACE(cmd);
    TempDir dir;
    std::string err;
    EXPECT_EQ(run({cmd, "-o", dir.file("p.data"), "--", WHYMISS_TRUST_PROG, "exit", "3"}, dir.path, &err), 3) << err;
    EXPECT_TRUE(whymiss::profile::read_profile(dir.file("p.data")).ok());
    EXPECT_EQ(run({cmd, "-o", dir.file("p.data"), "--", WHYMISS_TRUST_PROG, "segv"}, dir.path, &err), 128 + SIGSEGV)
        << err;
    auto p = whymiss::profile::read_profile(dir.file("p.data"));
    ASSERT_TRUE(p) << p.error();
    EXPECT_EQ(p->meta.term_signal, SIGSEGV);
    EXPECT_EQ(run({cmd, "-o", dir.file("p.data"), "--", WHYMISS_TRUST_PROG, "exit", "0"}, dir.path, &err), 0) << err;
    // whymiss's own failure: a program that leaves no profile.
    EXPECT_EQ(run({cmd, "-o", dir.file("p.data"), "--", WHYMISS_TRUST_PROG, "exec", "/bin/true"}, dir.path, &err), 2);
  }
}

// Issue #18 item 7: `run` keeps a profile only when -o asks for one; otherwise it records into a
// private temporary directory it removes, and never writes (or replaces) whymiss.data.
TEST(Record, RunKeepsNoProfileUnlessAsked) {
  TempDir dir, tmp;
  ScopedEnv env("TMPDIR", tmp.path);
  std::string err;
  EXPECT_EQ(run({"run", "--format", "json", "--output", "r.json", "--", WHYMISS_TRUST_PROG, "exit", "0"},
                dir.path, &err), 0) << err;
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"r.json"});
  EXPECT_NE(slurp(dir.file("r.json")).find("\"findings\""), std::string::npos);
  EXPECT_TRUE(tmp.entries().empty()) << "the temporary profile was left behind";
  // A whymiss.data already there (here another run's profile) is left as it was.
  EXPECT_EQ(run({"record", "-o", "whymiss.data", "--", WHYMISS_TRUST_PROG, "exit", "0"}, dir.path, &err), 0);
  const std::string before = slurp(dir.file("whymiss.data"));
  EXPECT_EQ(run({"run", "--", WHYMISS_TRUST_PROG, "exit", "0"}, dir.path, &err), 0) << err;
  EXPECT_EQ(slurp(dir.file("whymiss.data")), before);
  EXPECT_TRUE(tmp.entries().empty());
  // With -o, the profile is kept where it says.
  EXPECT_EQ(run({"run", "-o", "kept.data", "--", WHYMISS_TRUST_PROG, "exit", "0"}, dir.path, &err), 0) << err;
  EXPECT_TRUE(whymiss::profile::read_profile(dir.file("kept.data")).ok());
}

}  // namespace
