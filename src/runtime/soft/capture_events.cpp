// Perf breakpoint events of the capture stage (see capture_internal.h for who may call these).
// One event per (thread, slot): an execution breakpoint on the window's instruction or an 8-byte
// read/write watchpoint on its word, counting every hit (sample_period 1) and raising the
// runtime's signal in the watched thread (O_ASYNC, F_SETSIG, F_SETOWN_EX/F_OWNER_TID) with
// si_fd naming the event. No ring buffer is mapped: the signal and its context are the sample.
// PERF_EVENT_IOC_REFRESH(n) enables the event for n overflows, after which the kernel disables
// it: that is what bounds a window's hits per thread even if the collector is late.
#include <fcntl.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/soft/capture_internal.h"

namespace whymiss::soft::capture::detail {

void note_failure(int err) {
  State& s = g();
  s.open_failures.fetch_add(1, std::memory_order_relaxed);
  int zero = 0;
  s.first_errno.compare_exchange_strong(zero, err ? err : EIO, std::memory_order_relaxed);
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

namespace {
// Routes the event's signal to thread `tid`; returns 0 or errno. O_ASYNC last, so nothing can be
// raised before the owner and the signal number are set (the event is still disabled anyway).
int route_signal(int fd, pid_t tid, int signo) {
  f_owner_ex owner{F_OWNER_TID, tid};
  if (fcntl(fd, F_SETSIG, signo) < 0 || fcntl(fd, F_SETOWN_EX, &owner) < 0) return errno;
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_ASYNC) < 0) return errno;
  return 0;
}
}  // namespace

int arm_event(uint32_t e, uint32_t slot, uint32_t w) {
  State& s = g();
  Thread& t = s.threads[e];
  if (s.backend.load(std::memory_order_relaxed) == uint32_t(profile::CaptureBackend::Int3)) {
    // No event: the int3 is process-wide; the entry only marks the thread as in the window
    // (its hits bound what is recorded for it).
    t.hits[slot].store(0, std::memory_order_relaxed);
    t.window[slot] = w;
    t.fd[slot] = kSoftFd;
    return 0;
  }
  const Window& win = s.windows[w];
  perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_BREAKPOINT;
  a.size = sizeof a;
  a.sample_period = 1;
  a.disabled = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  if (win.reason == 0) {
    a.bp_type = HW_BREAKPOINT_X;
    a.bp_addr = win.ip;
    a.bp_len = sizeof(long);  // the only length x86 accepts for execution breakpoints
  } else {
    a.bp_type = HW_BREAKPOINT_RW;
    a.bp_addr = win.word;
    a.bp_len = HW_BREAKPOINT_LEN_8;
  }
  const long fd = syscall(SYS_perf_event_open, &a, t.tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    note_failure(err);
    return err;
  }
  int err = fd >= long(kFdTable) ? EMFILE : route_signal(int(fd), t.tid, s.cfg.signo);
  if (!err) {
    t.hits[slot].store(0, std::memory_order_relaxed);
    t.window[slot] = w;
    t.fd[slot] = int(fd);
    s.fds[fd].store(pack_fd(slot, e, w), std::memory_order_release);
    if (ioctl(int(fd), PERF_EVENT_IOC_REFRESH, int(s.cfg.captures_per_window)) < 0) {
      err = errno;
      s.fds[fd].store(0, std::memory_order_release);
      t.fd[slot] = -1;
    }
  }
  if (err) {
    close(int(fd));
    note_failure(err);
  }
  return err;
}

namespace {
volatile uint64_t g_probe_word = 0;
}

int probe_hardware() {
  perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_BREAKPOINT;
  a.size = sizeof a;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.bp_type = HW_BREAKPOINT_W;
  a.bp_addr = reinterpret_cast<uint64_t>(&g_probe_word);
  a.bp_len = HW_BREAKPOINT_LEN_8;
  const long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return errno;
  for (uint64_t i = 0; i < 4; ++i) g_probe_word = i;
  uint64_t count = 0;
  const bool counted = read(int(fd), &count, sizeof count) == long(sizeof count) && count > 0;
  close(int(fd));
  return counted ? 0 : ENODEV;
}

void disarm_event(uint32_t e, uint32_t slot) {
  State& s = g();
  Thread& t = s.threads[e];
  const int fd = t.fd[slot];
  if (fd < 0) return;
  if (fd == kSoftFd) {  // Int3 marker: nothing to close
    t.fd[slot] = -1;
    return;
  }
  // Cleared before close: a signal still queued for this fd (or for a later event that reuses
  // the number) is then not taken for this window.
  s.fds[fd].store(0, std::memory_order_release);
  close(fd);
  t.fd[slot] = -1;
}

}  // namespace whymiss::soft::capture::detail
