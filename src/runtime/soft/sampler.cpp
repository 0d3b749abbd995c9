#include "runtime/soft/sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace whymiss::soft {

int pick_signal(int lo, int hi) {
  sigset_t blocked;
  sigemptyset(&blocked);
  pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
  for (int s = lo; s <= hi; ++s) {
    struct sigaction old {};
    if (sigaction(s, nullptr, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
    if (sigismember(&blocked, s) == 1) continue;
    return s;
  }
  return 0;
}

int pick_signal() { return pick_signal(SIGRTMIN + 8, SIGRTMAX); }

int open_task_clock(pid_t tid, uint64_t period_ns, int signo) {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = period_ns;
  a.sample_type = 0;       // no ring buffer: the signal is the sample, the context its content
  a.wakeup_events = 1;     // a signal per overflow
  a.exclude_kernel = 1;    // allowed at perf_event_paranoid 2 for our own threads
  a.exclude_hv = 1;
  a.disabled = 1;          // enabled once the signal is routed
  int fd = int(syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) return -errno;
  f_owner_ex owner{F_OWNER_TID, tid};
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_ASYNC) != 0 || fcntl(fd, F_SETSIG, signo) != 0 ||
      fcntl(fd, F_SETOWN_EX, &owner) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

int read_perf_paranoid() {
  int fd = open("/proc/sys/kernel/perf_event_paranoid", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return INT_MIN;
  char buf[32] = {};
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return INT_MIN;
  return std::atoi(buf);
}

size_t refusal_message(int err, int paranoid, char* out, size_t n) {
  int len = 0;
  if ((err == EACCES || err == EPERM) && paranoid > 2) {
    len = std::snprintf(out, n,
                        "soft mode cannot sample: perf_event_open was refused because "
                        "kernel.perf_event_paranoid is %d; allow it with `sudo sysctl "
                        "kernel.perf_event_paranoid=2` or give the program CAP_PERFMON",
                        paranoid);
  } else if (err == EACCES || err == EPERM) {
    len = std::snprintf(out, n,
                        "soft mode cannot sample: perf_event_open was refused (%s) although "
                        "kernel.perf_event_paranoid allows it, so a seccomp filter or the container "
                        "runtime blocks it; allow the perf_event_open system call (e.g. docker "
                        "--security-opt seccomp=unconfined, or --cap-add PERFMON)",
                        err == EPERM ? "EPERM" : "EACCES");
  } else if (err == ENOSYS) {
    len = std::snprintf(out, n,
                        "soft mode cannot sample: this kernel has no perf_event_open (built without "
                        "CONFIG_PERF_EVENTS, or a seccomp filter answers ENOSYS); use a kernel with "
                        "perf events or allow the system call");
  } else if (err == ENOENT || err == EOPNOTSUPP || err == EINVAL) {
    len = std::snprintf(out, n,
                        "soft mode cannot sample: the kernel refused the task-clock software event "
                        "(%s); it needs Linux 2.6.31 or later with perf events enabled",
                        strerrorname_np(err) ? strerrorname_np(err) : "error");
  } else if (err == EMFILE || err == ENFILE) {
    len = std::snprintf(out, n,
                        "soft mode cannot sample: no file descriptor is left for the task-clock "
                        "event; raise the limit with `ulimit -n`");
  } else {
    len = std::snprintf(out, n, "soft mode cannot sample: perf_event_open failed (%s)",
                        strerrordesc_np(err) ? strerrordesc_np(err) : "unknown error");
  }
  if (len < 0) len = 0;
  return std::min(size_t(len), n ? n - 1 : 0);
}

// ---- SampleStore ----

int SampleStore::init(size_t max_records) {
  chunks_ = uint32_t((max_records + kChunk - 1) / kChunk);
  if (chunks_ == 0) chunks_ = 1;
  bytes_ = size_t(chunks_) * kChunk * sizeof(profile::SampleRecord) +
           size_t(chunks_) * sizeof(std::atomic<uint32_t>);
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    recs_ = nullptr;
    return errno;
  }
  recs_ = static_cast<profile::SampleRecord*>(p);
  used_ = reinterpret_cast<std::atomic<uint32_t>*>(recs_ + size_t(chunks_) * kChunk);
  claimed_.store(0, std::memory_order_relaxed);
  return 0;
}

bool SampleStore::append(Cursor& c, const profile::SampleRecord& r) {
  if (!recs_) return false;
  if (c.chunk == 0 || c.used == kChunk) {
    uint32_t k = claimed_.load(std::memory_order_relaxed);
    // Claim with a CAS so that a full store stays full (claimed_ never runs past chunks_).
    do {
      if (k >= chunks_) return false;
    } while (!claimed_.compare_exchange_weak(k, k + 1, std::memory_order_relaxed));
    used_[k].store(0, std::memory_order_relaxed);  // a chunk reused after forget()
    c.chunk = k + 1;
    c.used = 0;
  }
  const uint32_t k = c.chunk - 1;
  recs_[size_t(k) * kChunk + c.used] = r;
  ++c.used;
  used_[k].store(c.used, std::memory_order_release);
  return true;
}

size_t SampleStore::count() const {
  if (!recs_) return 0;
  size_t n = 0;
  const uint32_t claimed = std::min(claimed_.load(std::memory_order_acquire), chunks_);
  for (uint32_t k = 0; k < claimed; ++k) n += used_[k].load(std::memory_order_acquire);
  return n;
}

size_t SampleStore::export_sorted(profile::SampleRecord* out, size_t max) const {
  if (!recs_) return 0;
  size_t n = 0;
  const uint32_t claimed = std::min(claimed_.load(std::memory_order_acquire), chunks_);
  for (uint32_t k = 0; k < claimed && n < max; ++k) {
    uint32_t u = std::min(used_[k].load(std::memory_order_acquire), kChunk);
    for (uint32_t i = 0; i < u && n < max; ++i) out[n++] = recs_[size_t(k) * kChunk + i];
  }
  // std::sort: no temporary buffer (this may run in a dying process's signal handler).
  std::sort(out, out + n, [](const profile::SampleRecord& a, const profile::SampleRecord& b) {
    return a.time_ns < b.time_ns;
  });
  return n;
}

void SampleStore::release() {
  if (recs_) munmap(recs_, bytes_);
  recs_ = nullptr;
  used_ = nullptr;
  chunks_ = 0;
  claimed_.store(0, std::memory_order_relaxed);
}

}  // namespace whymiss::soft
