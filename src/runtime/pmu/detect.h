// Start-up detection of the pmu collector: which sampling PMU this machine has, whether this
// process may open it, and the plan (events, format) to run with. `whymiss --mode auto` uses
// pmu when `available`, else soft, and prints `reason`.
//
// Steps: CPU vendor/family/model (cpuid); perf_event_paranoid; sysfs PMUs under
// /sys/bus/event_source/devices (cpu, cpu_core on hybrid Intel, ibs_op on AMD); a real probe
// with perf_event_open on this process: hardware cycles first (a VM without a virtual PMU
// answers ENOENT or EOPNOTSUPP), then the exact events the plan would open.
#pragma once
#include <linux/perf_event.h>
#include <sys/types.h>

#include <string>

#include "runtime/pmu/plan.h"

namespace whymiss::pmu {

struct Detection {
  bool available = false;
  Backend backend = Backend::None;  // what was found, even when it cannot be opened
  // What was chosen or why not: one clause without a final period, meant to follow e.g.
  // "whymiss: using soft mode: " or "whymiss: pmu mode: ".
  std::string reason;
  Plan plan;                        // valid when available
  int paranoid = -1;                // /proc/sys/kernel/perf_event_paranoid, -1 unreadable
};

// Everything detect() looks at, replaceable by tests.
struct DetectEnv {
  std::string sysfs = "/sys/bus/event_source/devices";
  std::string paranoid_path = "/proc/sys/kernel/perf_event_paranoid";
  // Empty: read with cpuid. Otherwise "GenuineIntel", "AuthenticAMD", "HygonGenuine", ...
  std::string vendor;
  uint32_t family = 0, model = 0;
  // perf_event_open(attr, pid, cpu, group_fd, flags): returns an fd or -errno.
  int (*open_event)(perf_event_attr* attr, pid_t pid, int cpu, int group_fd, unsigned long flags) =
      nullptr;  // nullptr: the real system call
  // Encodes an Intel event by libpfm4 name; nullptr: libpfm4 (pfm_encode.h).
  bool (*encode)(const char* name, uint32_t* type, uint64_t* config, uint64_t* config1,
                 std::string* why) = nullptr;
  uint64_t period = 0;  // 0: the default for the backend
  // PEBS load-latency threshold in cycles. 3 (the hardware minimum) samples loads regardless
  // of where they hit, so that sampled accesses stand for all loads and miss ratios hold; a
  // threshold above the L1 latency would sample misses only (more miss samples, biased ratios).
  uint32_t ldlat = 3;
};

Detection detect(const DetectEnv& env = DetectEnv{});

}  // namespace whymiss::pmu
