// `whymiss record / report / run` on bad input: one sentence on stderr, exit status 2, and no
// profile or report file left behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/pmu_status.h"
#include "cli/profile_cmds.h"

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

TEST_F(CliProfile, RunWithoutProgram) {
  expect_one_sentence(call(run_main, {"run", "--format", "json"}), "no program given");
}

}  // namespace
}  // namespace whymiss::cli
