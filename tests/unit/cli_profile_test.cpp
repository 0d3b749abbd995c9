// `whymiss record / report / run` on bad input: one sentence on stderr, exit status 2, and no
// profile or report file left behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/output.h"
#include "cli/pmu_status.h"
#include "cli/profile_cmds.h"
#include "cli/progress_line.h"
#include "model/profile.h"

namespace whymiss::cli {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status;
  std::string out, err;
};

Outcome call(int (*fn)(int, char**, std::ostream&, std::ostream&), std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out, err;
  int st = fn(int(argv.size()), argv.data(), out, err);
  return {st, out.str(), err.str()};
}

class CliProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("whymiss-cli-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) { return (dir_ / name).string(); }
  size_t files() { return size_t(std::distance(fs::directory_iterator(dir_), fs::directory_iterator())); }
  fs::path dir_;
};

void expect_one_sentence(const Outcome& o, const std::string& fragment) {
  EXPECT_EQ(o.status, 2);
  EXPECT_TRUE(o.out.empty());
  EXPECT_NE(o.err.find(fragment), std::string::npos) << o.err;
  EXPECT_EQ(o.err.rfind("whymiss: ", 0), 0u) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
}

TEST_F(CliProfile, RecordWithoutProgram) {
  expect_one_sentence(call(record_main, {"record", "-o", path("p")}), "no program given");
  expect_one_sentence(call(record_main, {"record", "--"}), "no program given");
  EXPECT_EQ(files(), 0u);
}

TEST_F(CliProfile, RecordMissingProgram) {
  expect_one_sentence(call(record_main, {"record", "-o", path("p"), "--", path("nope")}), "cannot find program");
  expect_one_sentence(call(record_main, {"record", "--", "whymiss-no-such-program-xyz"}), "cannot find program");
  EXPECT_EQ(files(), 0u);
}

TEST_F(CliProfile, RecordUninstrumentedProgramSuggestsSoftMode) {
  auto o = call(record_main, {"record", "--mode", "exact", "-o", path("p"), "--", "/bin/true"});
  expect_one_sentence(o, "was not built with whymiss-cc");
  EXPECT_NE(o.err.find("--mode soft"), std::string::npos);
  EXPECT_EQ(files(), 0u);
}

TEST_F(CliProfile, SamplingModesRefuseStaticPrograms) {
  const std::string stat = std::string(WHYMISS_BINARY_DIR) + "/workloads/native/wl_control_static";
  ASSERT_TRUE(fs::exists(stat));
  for (const char* mode : {"soft", "auto", "pmu"}) {
    auto o = call(record_main, {"record", "--mode", mode, "-o", path("p"), "--", stat});
    expect_one_sentence(o, "is statically linked");
  }
  EXPECT_EQ(files(), 0u);
}

TEST_F(CliProfile, PmuModeRefusedWithoutPmuNamesTheCause) {
  // Our machines have no PMU; where one exists this test has nothing to check.
  if (detect_pmu().available) GTEST_SKIP() << "this machine has a PMU";
  auto o = call(record_main, {"record", "--mode", "pmu", "-o", path("p"), "--", "/bin/true"});
  expect_one_sentence(o, "pmu mode is not possible here");
  EXPECT_NE(o.err.find("--mode soft"), std::string::npos);
  EXPECT_EQ(files(), 0u);
}

TEST_F(CliProfile, HelpBeforeTheProgramPrintsUsage) {
  auto o = call(record_main, {"record", "--help"});
  EXPECT_EQ(o.status, 0);
  EXPECT_NE(o.out.find("usage: whymiss record"), std::string::npos);
  EXPECT_NE(o.out.find("--mode auto|exact|soft|pmu"), std::string::npos);
  EXPECT_EQ(files(), 0u);
}

TEST_F(CliProfile, RecordNonElfFile) {
  std::ofstream(path("script.sh")) << "#!/bin/sh\necho hi\n";
  fs::permissions(path("script.sh"), fs::perms::owner_all);
  expect_one_sentence(call(record_main, {"record", "-o", path("p"), "--", path("script.sh")}), "not an ELF");
}

TEST_F(CliProfile, RecordBadOptions) {
  expect_one_sentence(call(record_main, {"record", "--mode", "warp", "--", "/bin/true"}), "unknown mode");
  expect_one_sentence(call(record_main, {"record", "--cores", "0", "--", "/bin/true"}), "--cores");
  expect_one_sentence(call(record_main, {"record", "--cache", "L1=3K:3:3", "--", "/bin/true"}), "L1");
  expect_one_sentence(call(record_main, {"record", "--frobnicate", "--", "/bin/true"}), "frobnicate");
  expect_one_sentence(call(record_main, {"record", "-o", path("no/such/dir/p"), "--", "/bin/true"}),
                      "");
}

TEST_F(CliProfile, ReportMissingOrForeignProfile) {
  expect_one_sentence(call(report_main, {"report", "-i", path("missing")}), "cannot open profile");
  std::ofstream(path("foreign")) << "hello, this is not a profile at all\n";
  expect_one_sentence(call(report_main, {"report", path("foreign")}), "not a valid whymiss profile");
  expect_one_sentence(call(report_main, {"report", "a", "b"}), "one profile");
  expect_one_sentence(call(report_main, {"report", path("foreign"), "--format", "xml"}), "unknown format");
}

TEST_F(CliProfile, ReportToBadPathWritesNothing) {
  std::ofstream(path("foreign")) << "x";
  auto o = call(report_main, {"report", path("foreign"), "--output", path("nodir/r.txt")});
  EXPECT_EQ(o.status, 2);
  EXPECT_FALSE(fs::exists(path("nodir")));
}

const std::string kGolden = std::string(WHYMISS_SOURCE_DIR) + "/tests/golden/capacity.data";
const std::string kWhymiss = std::string(WHYMISS_BINARY_DIR) + "/bin/whymiss";

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Runs the whymiss binary with stdin/stdout from/to the given files; returns its exit status.
int spawn(const std::vector<std::string>& args, const std::string& in, const std::string& out,
          std::string* err = nullptr) {
  // Standard error goes to a file of this process's own (not beside `out`, which may be
  // /dev/null: tests running in parallel would share it).
  static int calls = 0;
  const std::string err_path = (fs::temp_directory_path() / ("whymiss-cli-stderr-" + std::to_string(getpid()) +
                                                              "-" + std::to_string(++calls)))
                                   .string();
  pid_t pid = fork();
  if (pid == 0) {
    int i = open(in.c_str(), O_RDONLY), o = open(out.c_str(), O_WRONLY),
        e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (i < 0 || o < 0 || e < 0) _exit(126);
    dup2(i, 0);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> argv{const_cast<char*>(kWhymiss.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (err) *err = slurp(err_path);
  unlink(err_path.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// #1: the runtime's temporary file is created exclusively; a link planted at a name it could
// pick is never followed.
TEST_F(CliProfile, ProfileTempFileNeverFollowsAPlantedLink) {
  std::ofstream(path("victim")) << "precious";
  const std::string out = path("p.data");
  const std::string pid = std::to_string(getpid());
  for (const std::string& suffix : {".tmp." + pid, ".tmp." + pid + ".0", ".tmp." + pid + ".1"})
    fs::create_symlink(path("victim"), out + suffix);
  profile::Profile p;
  p.meta.mode = uint32_t(profile::Mode::Exact);
  p.geometry.levels = {{"L1", 32 * 1024, 8, 64}};
  p.counters.resize(1);
  ASSERT_TRUE(profile::write_profile(out, p).ok());
  EXPECT_EQ(slurp(path("victim")), "precious");
  EXPECT_TRUE(profile::read_profile(out).ok());
  EXPECT_EQ(fs::status(out).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
}

// A profile is streamed into the output by a writer (record's, from its tables). A writer that
// fails, with an errno value or by running out of memory, leaves nothing behind: no new file, no
// temporary beside it, and a file that was there unchanged; the sentence names the cause.
TEST_F(CliProfile, FailingWriterLeavesNoFileBehind) {
  const OutputOptions as_profile{OutputKind::Profile, true};
  auto half_then = [](int err) {
    return [err](int fd) {
      if (::write(fd, "WHYMISS-partial", 15) != 15) return errno;
      if (err == ENOMEM) throw std::bad_alloc();
      return err;
    };
  };
  auto st = write_output(path("new.data"), half_then(EIO), as_profile);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find(std::strerror(EIO)), std::string::npos) << st.error();
  EXPECT_EQ(files(), 0u);
  std::ofstream(path("old.data")) << "kept";
  st = write_output(path("old.data"), half_then(ENOMEM), as_profile);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find(std::strerror(ENOMEM)), std::string::npos) << st.error();
  EXPECT_EQ(slurp(path("old.data")), "kept");
  EXPECT_EQ(files(), 1u);
  // And one that succeeds replaces it whole.
  st = write_output(path("old.data"), [](int fd) { return ::write(fd, "new", 3) == 3 ? 0 : errno; },
                    as_profile);
  ASSERT_TRUE(st.ok()) << st.error();
  EXPECT_EQ(slurp(path("old.data")), "new");
  EXPECT_EQ(files(), 1u);
}

// #2: devices, FIFOs and symbolic links are written in place, never replaced by a file.
TEST_F(CliProfile, OutputOntoDeviceFifoOrLinkWritesInPlace) {
  const std::string null = path("null");
  ASSERT_EQ(mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << std::strerror(errno);
  auto o = call(report_main, {"report", "-i", kGolden, "--output", null});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(fs::is_character_file(fs::symlink_status(null)));

  // A symbolic link to a regular file: the link stays, its target gets the report.
  std::ofstream(path("target.txt")) << "old";
  fs::create_symlink(path("target.txt"), path("link"));
  o = call(report_main, {"report", "-i", kGolden, "--output", path("link")});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(path("link"))));
  EXPECT_NE(slurp(path("target.txt")).find("whymiss report"), std::string::npos);

  // A link to a pipe (what /dev/stdout is when output is piped) reaches the pipe.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  fs::create_symlink("/proc/self/fd/" + std::to_string(fds[1]), path("stdout"));
  std::string piped;
  std::thread reader([&] {
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) piped.append(buf, size_t(n));
  });
  o = call(report_main, {"report", "-i", kGolden, "--output", path("stdout")});
  close(fds[1]);
  reader.join();
  close(fds[0]);
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(piped.find("whymiss report"), std::string::npos);

  // A FIFO stays a FIFO; its reader gets the report.
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  std::string fifo_text;
  std::thread fifo_reader([&] { fifo_text = slurp(path("fifo")); });
  o = call(report_main, {"report", "-i", kGolden, "--output", path("fifo")});
  fifo_reader.join();
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(path("fifo"))));
  EXPECT_NE(fifo_text.find("whymiss report"), std::string::npos);

  // A dangling link is refused, and nothing is created at its target.
  fs::create_symlink(path("nowhere"), path("dangling"));
  expect_one_sentence(call(report_main, {"report", "-i", kGolden, "--output", path("dangling")}),
                      "does not exist");
  EXPECT_FALSE(fs::exists(path("nowhere")));
}

// #3: -o replaces only a whymiss profile (or, with --force, anything regular), keeps an existing
// file's permissions, and creates new profiles 0600.
TEST_F(CliProfile, ProfileOutputRefusesForeignFilesAndKeepsPermissions) {
  fs::copy_file("/bin/true", path("prog"));
  const std::string before = slurp(path("prog"));
  auto o = call(record_main, {"record", "-o", path("prog"), "--", "/bin/true"});
  expect_one_sentence(o, "refusing to overwrite");
  EXPECT_NE(o.err.find("--force"), std::string::npos);
  EXPECT_EQ(slurp(path("prog")), before);
  std::ofstream(path("notes.txt")) << "my notes";
  expect_one_sentence(call(record_main, {"record", "-o", path("notes.txt"), "--", "/bin/true"}),
                      "not a whymiss profile");
  EXPECT_EQ(slurp(path("notes.txt")), "my notes");

  const OutputOptions prof{OutputKind::Profile, false};
  const std::string golden = slurp(kGolden);
  ASSERT_TRUE(write_output(path("new.data"), golden, prof).ok());
  EXPECT_EQ(fs::status(path("new.data")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  fs::permissions(path("new.data"), fs::perms::owner_read | fs::perms::owner_write |
                                        fs::perms::group_read);
  ASSERT_TRUE(write_output(path("new.data"), golden, prof).ok());
  EXPECT_EQ(fs::status(path("new.data")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  ASSERT_TRUE(write_output(path("notes.txt"), golden, {OutputKind::Profile, true}).ok());
  EXPECT_EQ(slurp(path("notes.txt")), golden);

  // A report does not replace a profile (nor a program) unless forced; it does replace a
  // report, keeping its permissions.
  expect_one_sentence(call(report_main, {"report", "-i", kGolden, "--output", path("new.data")}),
                      "it is a whymiss profile");
  EXPECT_EQ(slurp(path("new.data")), golden);
  std::ofstream(path("r.txt")) << "old report";
  fs::permissions(path("r.txt"), fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_EQ(call(report_main, {"report", "-i", kGolden, "--output", path("r.txt")}).status, 0);
  EXPECT_EQ(fs::status(path("r.txt")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(call(report_main, {"report", "-i", kGolden, "--output", path("new.data"), "--force"}).status, 0);
}

// #9, #14: any kind of input gets one sentence, and the header is checked before reading on.
TEST_F(CliProfile, ReportInputOfAnyKind) {
  expect_one_sentence(call(report_main, {"report", "-i", dir_.string()}), "it is a directory");
  const std::string zero = path("zero");
  ASSERT_EQ(mknod(zero.c_str(), S_IFCHR | 0666, makedev(1, 5)), 0) << std::strerror(errno);
  expect_one_sentence(call(report_main, {"report", "-i", zero}), "magic number");
  // A stream with a valid header that claims more than it sends, and one that sends more.
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  std::string golden = slurp(kGolden);
  for (const std::string& feed : {golden.substr(0, golden.size() / 2), golden + "xx", golden}) {
    std::thread writer([&] { std::ofstream(path("fifo"), std::ios::binary) << feed; });
    auto o = call(report_main, {"report", "-i", path("fifo")});
    writer.join();
    if (feed == golden) EXPECT_EQ(o.status, 0) << o.err;
    else expect_one_sentence(o, "not a valid whymiss profile");
  }
  // Standard input is "-", named <stdin> in sentences.
  std::string err;
  EXPECT_EQ(spawn({"report", "-i", "-"}, kGolden, "/dev/null"), 0);
  EXPECT_EQ(spawn({"report", "-i", "-"}, "/dev/null", "/dev/null", &err), 2);
  EXPECT_NE(err.find("'<stdin>'"), std::string::npos) << err;
}

// #14: a section whose records have size 0 says so.
TEST_F(CliProfile, SectionOfZeroSizedRecordsIsNamed) {
  std::string b = slurp(kGolden);
  profile::SectionHeader s;
  std::memcpy(&s, b.data() + sizeof(profile::FileHeader), sizeof s);
  s.record_size = 0;
  std::memcpy(b.data() + sizeof(profile::FileHeader), &s, sizeof s);
  auto r = profile::parse_profile(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "x");
  ASSERT_FALSE(r.ok());
  // (The checksum fails first unless it is fixed up; the reader checks sections after it.)
  profile::FileHeader h;
  std::memcpy(&h, b.data(), sizeof h);
  h.version = profile::kVersion;  // (the golden file is of format 1, whose sum is another)
  h.checksum = profile::checksum(b.data() + sizeof h, b.size() - sizeof h);
  std::memcpy(b.data(), &h, sizeof h);
  r = profile::parse_profile(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("records of size 0"), std::string::npos) << r.error();
}

// #10: a report that cannot be written is an error, also on standard output.
TEST_F(CliProfile, ReportToAFullDeviceFails) {
  const std::string full = path("full");
  ASSERT_EQ(mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0) << std::strerror(errno);
  std::string err;
  EXPECT_EQ(spawn({"report", "-i", kGolden}, "/dev/null", full, &err), 2);
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(spawn({"report", "-i", kGolden, "--output", full}, "/dev/null", "/dev/null", &err), 2);
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  EXPECT_EQ(spawn({"--help"}, "/dev/null", full, &err), 2);
  EXPECT_TRUE(fs::is_character_file(fs::symlink_status(full)));
}

// #8: what can be checked before the program runs is: names too long, and settings in the
// environment that the runtime would refuse (or, for WHYMISS_INTERLEAVE, silently replace with
// the default).
TEST_F(CliProfile, RecordRefusesUpFrontWhatWouldFailAfterTheRun) {
  expect_one_sentence(call(record_main, {"record", "-o", path(std::string(300, 'x')), "--", "/bin/true"}),
                      "its name is too long");
  for (const auto& [name, value] : {std::pair{"WHYMISS_CACHE", "L1=3K:3:3"}, {"WHYMISS_CORES", "0"},
                                    {"WHYMISS_POLICY", "mru"}, {"WHYMISS_LLC", "both"},
                                    {"WHYMISS_PERIOD_US", "1"}, {"WHYMISS_INTERLEAVE", "Locks"}}) {
    setenv(name, value, 1);
    auto o = call(record_main, {"record", "-o", path("p"), "--", "/bin/true"});
    unsetenv(name);
    expect_one_sentence(o, std::string("the environment sets ") + name);
  }
  EXPECT_EQ(files(), 0u);
}

// #4: the program's arguments cannot forge report lines or send terminal codes.
TEST_F(CliProfile, TextReportEscapesControlCharacters) {
  auto p = profile::read_profile(kGolden);
  ASSERT_TRUE(p) << p.error();
  p->command = "./prog 'a\nfindings: none\x1b[2J' tab\there back\\slash caf\xc3\xa9 \xc2\x9b" "31m \xff";
  ASSERT_TRUE(profile::write_profile(path("p.data"), *p).ok());
  auto o = call(report_main, {"report", "-i", path("p.data")});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(o.out.find("\xc2\x9b"), std::string::npos);
  EXPECT_EQ(o.out.find("\nfindings: none"), std::string::npos);
  EXPECT_NE(o.out.find("program: ./prog 'a\\nfindings: none\\e[2J' tab\\there back\\\\slash "
                       "caf\xc3\xa9 \\xc2\\x9b31m \\xff"),
            std::string::npos)
      << o.out;
}

TEST_F(CliProfile, RunWithoutProgram) {
  expect_one_sentence(call(run_main, {"run", "--format", "json"}), "no program given");
}

// ---- the progress line (progress_line.h) ----

TEST(ProgressLine, Text) {
  EXPECT_EQ(progress_text(0, std::chrono::seconds(2)), "whymiss: 0 accesses simulated, 0:02 elapsed");
  EXPECT_EQ(progress_text(1234567, std::chrono::seconds(65)), "whymiss: 1,234,567 accesses simulated, 1:05 elapsed");
  EXPECT_EQ(progress_text(999, std::chrono::seconds(3 * 3600 + 62)), "whymiss: 999 accesses simulated, 3:01:02 elapsed");
}

TEST_F(CliProfile, ProgressLineOnlyOnATerminal) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_EQ(ProgressLine::create(path("p.progress"), fds[1]), nullptr);
  EXPECT_EQ(files(), 0u);  // no page either
  close(fds[0]);
  close(fds[1]);
}

// What the runtime sees of the page, and what the terminal shows: a child stands in for the
// program, reading the terminal until the line with its count appears, then exiting; wait()
// returns then, with the line cleared.
TEST_F(CliProfile, ProgressLineShowsThePageAndClearsIt) {
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  auto line = ProgressLine::create(path("p.progress"), slave);
  ASSERT_NE(line, nullptr);
  EXPECT_EQ(line->env(), "WHYMISS_PROGRESS=" + path("p.progress"));
  const int fd = open(path("p.progress").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* m = mmap(nullptr, progress::kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(m, MAP_FAILED);
  auto* page = static_cast<progress::Page*>(m);
  EXPECT_EQ(page->magic, progress::kMagic);
  page->attached.store(1);
  page->accesses.store(1234567);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);  // a line that never comes fails the test (SIGALRM), never hangs it
    std::string seen;
    char buf[256];
    while (seen.find("1,234,567 accesses simulated") == std::string::npos) {
      const ssize_t n = read(master, buf, sizeof buf);
      if (n <= 0) _exit(1);
      seen.append(buf, size_t(n));
    }
    _exit(0);
  }
  int status = 0;
  line->wait(pid, &status, std::chrono::milliseconds(10));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::string rest;
  pollfd p{master, POLLIN, 0};
  char buf[4096];
  while (poll(&p, 1, 0) > 0) {
    const ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0) break;
    rest.append(buf, size_t(n));
  }
  ASSERT_GE(rest.size(), 4u);
  EXPECT_EQ(rest.substr(rest.size() - 4), "\r\x1b[K") << rest;
  munmap(m, progress::kSize);
  line.reset();
  close(master);
  close(slave);
}

}  // namespace
}  // namespace whymiss::cli
