// Trap source of the capture tests (see soft_capture_traps.h).
#include "soft_capture_traps.h"

#include <asm/prctl.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstring>

#include "runtime/soft/capture_internal.h"
#include "runtime/soft/decode.h"

namespace whymiss::soft::test {
namespace {

using namespace capture::detail;

void (*g_deliver)(int, siginfo_t*, void*) = nullptr;
int g_signo = 0;
volatile uint64_t g_probe_word = 0;

thread_local volatile bool t_step = false;
thread_local uint64_t t_key[kMaxSlots];   // event seen in each slot (fd | window << 32)
thread_local uint64_t t_start[kMaxSlots]; // and its window's start (windows of re-inits differ)
thread_local uint32_t t_left[kMaxSlots];  // hits left before the emulated REFRESH runs out
thread_local MemOperand t_prev[kMaxMemOperands];
thread_local int t_prev_count = 0;

constexpr greg_t kTrapFlag = 0x100;

uint32_t my_entry() {
  State& s = g();
  if (!s.threads) return kNone;
  const pid_t me = pid_t(syscall(SYS_gettid));
  const uint32_t hw = s.thread_hw.load();
  for (uint32_t e = 0; e < hw; ++e) {
    const uint32_t st = s.threads[e].state.load();
    if ((st == kLive || st == kBusy) && s.threads[e].tid == me) return e;
  }
  return kNone;
}

bool prev_touched(uint64_t word) {
  for (int i = 0; i < t_prev_count; ++i)
    if (t_prev[i].addr < word + 8 && t_prev[i].addr + t_prev[i].size > word) return true;
  return false;
}

void on_trap(int, siginfo_t*, void* ctx) {
  auto* uc = static_cast<ucontext_t*>(ctx);
  if (!t_step) {
    uc->uc_mcontext.gregs[REG_EFL] &= ~kTrapFlag;
    return;
  }
  const uint64_t rip = uint64_t(uc->uc_mcontext.gregs[REG_RIP]);
  State& s = g();
  const uint32_t e = my_entry();
  for (uint32_t k = 0; e != kNone && k < kMaxSlots; ++k) {
    const int fd = s.threads[e].fd[k];
    if (fd < 0) continue;
    const uint32_t w = s.threads[e].window[k];
    const uint64_t key = uint64_t(uint32_t(fd)) | uint64_t(w) << 32;
    const Window& win = s.windows[w];
    if (t_key[k] != key || t_start[k] != win.start_ns)
      t_key[k] = key, t_start[k] = win.start_ns, t_left[k] = s.cfg.captures_per_window;
    const bool hit = win.reason == 0 ? rip == win.ip : prev_touched(win.word);
    if (!hit || t_left[k] == 0) continue;
    --t_left[k];
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = g_signo;
    si.si_code = POLL_IN;
    si.si_fd = fd;
    g_deliver(g_signo, &si, ctx);
  }
  // The operands of the instruction about to run, for the watchpoints at the next step.
  RegisterView rv;
  rv.uc = uc;
  uint64_t fs = 0;
  syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
  rv.fs_base = fs;
  MemAccess m;
  t_prev_count = decode_at(rip, rv, &m) == DecodeStatus::Ok ? m.count : 0;
  for (int i = 0; i < t_prev_count; ++i) t_prev[i] = m.ops[i];
}

}  // namespace

bool hw_breakpoints_fire() {
  static const bool fires = [] {
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
    if (fd < 0) return false;
    for (int i = 0; i < 4; ++i) g_probe_word = uint64_t(i);
    uint64_t count = 0;
    const bool ok = read(int(fd), &count, sizeof count) == sizeof count && count > 0;
    close(int(fd));
    return ok;
  }();
  return fires;
}

void init_traps(void (*deliver)(int, siginfo_t*, void*), int signo) {
  g_deliver = deliver;
  g_signo = signo;
  if (hw_breakpoints_fire()) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_trap;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTRAP, &sa, nullptr);
}

void with_traps(const std::function<void()>& fn) {
  if (hw_breakpoints_fire()) {
    fn();
    return;
  }
  t_prev_count = 0;  // (t_key/t_left persist: an event's hit budget spans calls, like REFRESH)
  t_step = true;
  asm volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
  fn();
  t_step = false;  // the next step clears TF
  asm volatile("" ::: "memory");
}

}  // namespace whymiss::soft::test
