// Detection: for real on this machine (no PMU here: it must say so), and against fake sysfs
// trees and fake perf_event_open answers for the machines we do not have.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "runtime/pmu/detect.h"
#include "runtime/pmu/pfm_encode.h"

namespace whymiss::pmu {
namespace {

namespace fs = std::filesystem;

// The real thing: whatever this machine is, detect() must agree with an independent probe.
TEST(PmuDetectReal, AgreesWithAnIndependentCyclesProbe) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_HARDWARE;
  a.config = PERF_COUNT_HW_CPU_CYCLES;
  a.disabled = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
  const int err = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  Detection d = detect();
  EXPECT_FALSE(d.reason.empty());
  if (err == ENOENT || err == EOPNOTSUPP || err == ENODEV) {
    // Our VMs: "PMU not available due to virtualization".
    EXPECT_FALSE(d.available);
    EXPECT_EQ(d.backend, Backend::None);
    EXPECT_NE(d.reason.find("no hardware PMU"), std::string::npos) << d.reason;
    EXPECT_NE(d.reason.find(std::strerror(err)), std::string::npos) << d.reason;
  } else if (err == 0) {
    // A machine with counters: either a usable plan or a reason naming the backend's problem.
    if (d.available) {
      EXPECT_TRUE(validate(d.plan).ok());
      EXPECT_NE(d.backend, Backend::None);
    }
  }
}

TEST(PmuDetectReal, LibpfmEitherEncodesTheIntelEventOrSaysWhy) {
  uint32_t type = 0;
  uint64_t config = 0, config1 = 0;
  std::string why;
  if (pfm_encode("MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=30", &type, &config, &config1, &why)) {
    EXPECT_EQ(config & 0xff, 0xcdu);  // event code of MEM_TRANS_RETIRED on every Intel core
    EXPECT_EQ(config1, 30u);
  } else {
    EXPECT_NE(why.find("MEM_TRANS_RETIRED"), std::string::npos) << why;
  }
  EXPECT_FALSE(pfm_encode("NO_SUCH_EVENT_ANYWHERE", &type, &config, &config1, &why));
  EXPECT_FALSE(why.empty());
}

// ---- fakes ----
struct Call {
  perf_event_attr attr;
  int group_fd;
};
std::vector<Call> g_calls;
int (*g_answer)(const perf_event_attr&) = nullptr;

int fake_open(perf_event_attr* a, pid_t, int, int group, unsigned long) {
  g_calls.push_back({*a, group});
  int r = g_answer ? g_answer(*a) : 0;
  if (r < 0) return r;
  return open("/dev/null", O_RDONLY | O_CLOEXEC);  // a real fd, since detect() closes it
}
bool no_pfm(const char* name, uint32_t*, uint64_t*, uint64_t*, std::string* why) {
  *why = std::string("libpfm4 knows no ") + name;
  return false;
}

class FakeMachine : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("whymiss_pmu_detect_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    g_calls.clear();
    g_answer = nullptr;
    env_.sysfs = (root_ / "devices").string();
    env_.paranoid_path = (root_ / "paranoid").string();
    env_.open_event = fake_open;
    env_.encode = no_pfm;
    put("paranoid", "2\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  void put(const std::string& rel, const std::string& text) {
    fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void amd() {
    env_.vendor = "AuthenticAMD";
    env_.family = 0x19;
    env_.model = 0x11;
  }
  void intel(bool aux) {
    env_.vendor = "GenuineIntel";
    env_.family = 6;
    env_.model = 0x55;
    put("devices/cpu/type", "4\n");
    put("devices/cpu/format/event", "config:0-7\n");
    put("devices/cpu/format/umask", "config:8-15\n");
    put("devices/cpu/format/ldlat", "config1:0-15\n");
    put("devices/cpu/events/mem-loads", "event=0xcd,umask=0x1,ldlat=3\n");
    put("devices/cpu/events/mem-stores", "event=0xd0,umask=0x82\n");
    if (aux) put("devices/cpu/events/mem-loads-aux", "event=0x03,umask=0x82\n");
  }
  fs::path root_;
  DetectEnv env_;
};

TEST_F(FakeMachine, AmdWithIbsGivesAnIbsPlanThatRoundTrips) {
  amd();
  put("devices/ibs_op/type", "11\n");
  put("devices/ibs_op/format/cnt_ctl", "config:19\n");
  Detection d = detect(env_);
  ASSERT_TRUE(d.available) << d.reason;
  EXPECT_EQ(d.backend, Backend::AmdIbs);
  EXPECT_NE(d.reason.find("ibs_op"), std::string::npos);
  EXPECT_EQ(d.plan.events[0].type, 11u);
  EXPECT_EQ(d.plan.events[0].config, 1ull << 19);
  EXPECT_EQ(d.plan.family, 0x19u);
  EXPECT_TRUE(d.plan.exclude_kernel);
  // The probe opened exactly what the runtime will: the cycles check, then the IBS event.
  ASSERT_EQ(g_calls.size(), 2u);
  EXPECT_EQ(g_calls[1].attr.type, 11u);
  EXPECT_EQ(g_calls[1].attr.sample_type, kIbsSampleType);
  EXPECT_EQ(g_calls[1].attr.sample_period % 16, 0u);
  auto back = parse_plan(plan_to_string(d.plan));
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(plan_to_string(*back), plan_to_string(d.plan));
}

TEST_F(FakeMachine, IbsThatRefusesExcludeBitsIsOpenedWithout) {
  amd();
  put("devices/ibs_op/type", "11\n");
  g_answer = [](const perf_event_attr& a) {
    return a.type == 11 && (a.exclude_kernel || a.exclude_hv) ? -EINVAL : 0;
  };
  Detection d = detect(env_);
  ASSERT_TRUE(d.available) << d.reason;
  EXPECT_FALSE(d.plan.exclude_kernel);
  EXPECT_EQ(g_calls.back().attr.exclude_kernel, 0u);
  EXPECT_EQ(g_calls.back().attr.exclude_hv, 0u);
}

TEST_F(FakeMachine, AmdWithoutIbsSaysSo) {
  amd();
  Detection d = detect(env_);
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.backend, Backend::None);
  EXPECT_NE(d.reason.find("ibs_op"), std::string::npos) << d.reason;
}

TEST_F(FakeMachine, NoCyclesCounterMeansNoPmu) {
  intel(false);
  g_answer = [](const perf_event_attr&) { return -ENOENT; };
  Detection d = detect(env_);
  EXPECT_FALSE(d.available);
  EXPECT_NE(d.reason.find("no hardware PMU"), std::string::npos) << d.reason;
  EXPECT_EQ(g_calls.size(), 1u);
}

TEST_F(FakeMachine, ParanoidSettingIsNamedWhenPerfRefuses) {
  intel(false);
  put("paranoid", "3\n");
  g_answer = [](const perf_event_attr&) { return -EACCES; };
  Detection d = detect(env_);
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.paranoid, 3);
  EXPECT_NE(d.reason.find("perf_event_paranoid is 3"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("CAP_PERFMON"), std::string::npos) << d.reason;
}

TEST_F(FakeMachine, IntelEventsFromSysfsWhenLibpfmKnowsNone) {
  intel(false);
  env_.ldlat = 50;
  Detection d = detect(env_);
  ASSERT_TRUE(d.available) << d.reason;
  EXPECT_EQ(d.backend, Backend::IntelPebs);
  ASSERT_EQ(d.plan.event_count, 2u);
  EXPECT_EQ(d.plan.events[0].role, Role::Loads);
  EXPECT_EQ(d.plan.events[0].config, 0x1cdu);
  EXPECT_EQ(d.plan.events[0].config1, 50u);  // our threshold, not sysfs's default
  EXPECT_EQ(d.plan.events[1].role, Role::Stores);
  EXPECT_EQ(d.plan.events[1].config, 0x82d0u);
  EXPECT_EQ(d.plan.events[0].type, 4u);
  EXPECT_EQ(d.plan.events[0].precise_ip, 2);
  EXPECT_EQ(g_calls.back().attr.sample_type, kPebsSampleType);
}

TEST_F(FakeMachine, AuxLeaderGroupsTheLoadEventAndPreciseFallsBack) {
  intel(true);
  g_answer = [](const perf_event_attr& a) { return a.precise_ip == 2 ? -EOPNOTSUPP : 0; };
  Detection d = detect(env_);
  ASSERT_TRUE(d.available) << d.reason;
  ASSERT_EQ(d.plan.event_count, 3u);
  EXPECT_EQ(d.plan.events[0].role, Role::Leader);
  EXPECT_EQ(d.plan.events[0].config, 0x8203u);
  EXPECT_EQ(d.plan.events[1].precise_ip, 1);
  // Last probe round: leader opened without a group, the others inside its group.
  const size_t n = g_calls.size();
  ASSERT_GE(n, 3u);
  EXPECT_EQ(g_calls[n - 3].group_fd, -1);
  EXPECT_EQ(g_calls[n - 3].attr.sample_period, 0u);
  EXPECT_GE(g_calls[n - 2].group_fd, 0);
  EXPECT_EQ(g_calls[n - 2].group_fd, g_calls[n - 1].group_fd);
}

TEST_F(FakeMachine, IntelWithLibpfmUsesItsEncoding) {
  intel(false);
  env_.encode = [](const char* name, uint32_t* type, uint64_t* c, uint64_t* c1, std::string*) {
    *type = PERF_TYPE_RAW;
    *c = std::strncmp(name, "MEM_TRANS", 9) == 0 ? 0x1cd : 0x82d0 | (1ull << 22);
    *c1 = 30;
    return true;
  };
  Detection d = detect(env_);
  ASSERT_TRUE(d.available) << d.reason;
  EXPECT_EQ(d.plan.events[1].config, 0x82d0u | (1ull << 22));
}

TEST_F(FakeMachine, IntelWithoutLoadLatencyEvent) {
  env_.vendor = "GenuineIntel";
  put("devices/cpu/type", "4\n");
  Detection d = detect(env_);
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.backend, Backend::None);
  EXPECT_NE(d.reason.find("libpfm4 knows no MEM_TRANS_RETIRED"), std::string::npos) << d.reason;
}

TEST_F(FakeMachine, OtherVendors) {
  env_.vendor = "CentaurHauls";
  Detection d = detect(env_);
  EXPECT_FALSE(d.available);
  EXPECT_NE(d.reason.find("CentaurHauls"), std::string::npos);
  EXPECT_TRUE(g_calls.empty());
}

}  // namespace
}  // namespace whymiss::pmu
