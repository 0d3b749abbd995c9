#include "cli/pmu_status.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace whymiss::cli {

// Minimal probe until the pmu library's detection is wired: can a hardware cycles event be
// opened for this process at all?
PmuStatus detect_pmu() {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_HARDWARE;
  a.config = PERF_COUNT_HW_CPU_CYCLES;
  a.disabled = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  int fd = int(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  PmuStatus s;
  if (fd >= 0) {
    ::close(fd);
    s.available = false;
    s.reason = "hardware counters exist but PEBS/IBS support is not built into this whymiss";
    return s;
  }
  int e = errno;
  if (e == ENOENT || e == EOPNOTSUPP || e == ENODEV)
    s.reason = "the kernel reports no hardware performance counters (typical of virtual machines)";
  else if (e == EACCES || e == EPERM)
    s.reason = "perf_event_open was refused (perf_event_paranoid or seccomp)";
  else
    s.reason = std::string("perf_event_open failed: ") + std::strerror(e);
  return s;
}

}  // namespace whymiss::cli
