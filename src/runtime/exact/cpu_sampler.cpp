#include "runtime/exact/cpu_sampler.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "runtime/common/heap.h"
#include "runtime/common/signal_guard.h"
#include "runtime/soft/sampler.h"

namespace whymiss::rt::cpu {
namespace {

using profile::CpuSampleRecord;

// Identifies our timers' signals (si_value) among others of the same number.
constinit char g_cookie = 0;

struct State {
  std::atomic<bool> on{false};       // handler installed, store mapped, not stopped
  std::atomic<uint32_t> active{0};   // handlers past the `on` check (finish waits for 0)
  pid_t owner = 0;
  int signo = 0;
  uint64_t period_ns = 0;
  void (*tick)() = nullptr;
  CpuSampleRecord* recs = nullptr;
  size_t cap = 0;
  std::atomic<uint64_t> claimed{0};
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> overruns{0};
  std::atomic<uint32_t> threads{0};
  std::atomic<uint32_t> failed_threads{0};
  std::atomic<int> first_errno{0};
  pthread_key_t key{};
  bool key_ok = false;
  // Why sampling is off (set at start, before any thread could read it).
  char why_off[256] = {};
  char note[512] = {};
  profile::CpuSamplingRecord rec{};
  profile::NoteRecord note_rec{};
};
constinit State g;

thread_local uint32_t t_index_plus_one __attribute__((tls_model("initial-exec"))) = 0;

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // (vDSO; async-signal-safe)
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void take(siginfo_t* si, void* ctx) {
  const uint32_t idx = t_index_plus_one;
  if (idx == 0) return;  // not a thread of ours (cannot happen: timers name their thread)
  if (si->si_overrun > 0) g.overruns.fetch_add(uint64_t(si->si_overrun), std::memory_order_relaxed);
  const uint64_t slot = g.claimed.fetch_add(1, std::memory_order_relaxed);
  if (slot >= g.cap) {
    g.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const auto* uc = static_cast<const ucontext_t*>(ctx);
  CpuSampleRecord& r = g.recs[slot];
  r.time_ns = mono_ns();
  r.ip = uint64_t(uc->uc_mcontext.gregs[REG_RIP]);
  r.thread = idx - 1;
  r.flags = in_runtime() ? profile::kCpuSampleInRuntime : 0;
}

// SA_SIGINFO handler of the sampling signal. Anything but one of our timers' expirations (a
// kill/sigqueue of the program, a timer of the program's on the same number) goes to what the
// program asked for that signal.
void on_signal(int s, siginfo_t* si, void* ctx) {
  const int saved = errno;
  if (si == nullptr || si->si_code != SI_TIMER || si->si_value.sival_ptr != &g_cookie) {
    sig::forward(s, si, ctx);
    errno = saved;
    return;
  }
  g.active.fetch_add(1, std::memory_order_acquire);
  if (g.on.load(std::memory_order_acquire) && getpid() == g.owner) {
    take(si, ctx);
    if (g.tick) g.tick();
  }
  g.active.fetch_sub(1, std::memory_order_release);
  errno = saved;
}

// pthread key destructor: the thread exits; its timer goes (a timer holds a queued-signal slot
// of the process's RLIMIT_SIGPENDING until deleted).
void thread_end(void* v) {
  const int saved = errno;
  const long id = long(reinterpret_cast<uintptr_t>(v)) - 1;
  syscall(SYS_timer_delete, id);
  errno = saved;
}

void off(const char* why) { std::snprintf(g.why_off, sizeof g.why_off, "%s", why); }

}  // namespace

void start(pid_t owner, const Knobs& k) {
  g.owner = owner;
  g.period_ns = k.period_ns ? k.period_ns : Knobs{}.period_ns;
  g.tick = k.tick;
  void* p = mmap(nullptr, k.max_samples * sizeof(CpuSampleRecord), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return off("its sample store could not be mapped");
  g.recs = static_cast<CpuSampleRecord*>(p);
  g.cap = k.max_samples;
  g.signo = soft::pick_signal();
  if (g.signo == 0)
    return off("no real-time signal is free (all have handlers or are blocked)");
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);  // the signal itself is blocked while its handler runs
  if (sig::real_sigaction(g.signo, &sa, nullptr) != 0)
    return off("its signal handler could not be installed");
  sig::reserve(g.signo);
  g.key_ok = pthread_key_create(&g.key, thread_end) == 0;
  g.on.store(true, std::memory_order_release);
}

void thread_start(uint32_t index) {
  if (!g.on.load(std::memory_order_acquire) || t_index_plus_one != 0) return;
  t_index_plus_one = index + 1;
  const int saved = errno;
  struct sigevent sev {};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = g.signo;
  sev.sigev_value.sival_ptr = &g_cookie;
  sev._sigev_un._tid = pid_t(syscall(SYS_gettid));
  int id = -1;
  const timespec every{time_t(g.period_ns / 1000000000ull), long(g.period_ns % 1000000000ull)};
  const itimerspec its{every, every};
  if (syscall(SYS_timer_create, CLOCK_THREAD_CPUTIME_ID, &sev, &id) != 0 ||
      syscall(SYS_timer_settime, id, 0, &its, nullptr) != 0) {
    int expected = 0;
    g.first_errno.compare_exchange_strong(expected, errno ? errno : EINVAL);
    if (id >= 0) syscall(SYS_timer_delete, id);
    g.failed_threads.fetch_add(1, std::memory_order_relaxed);
  } else {
    g.threads.fetch_add(1, std::memory_order_relaxed);
    if (g.key_ok) pthread_setspecific(g.key, reinterpret_cast<void*>(uintptr_t(id) + 1));
  }
  errno = saved;
}

size_t export_sections(profile::SectionData* out, StringTable& strings) {
  const bool was_on = g.on.exchange(false, std::memory_order_acq_rel);
  // Handlers already past the check finish their record first (bounded: one of them may be
  // this very thread, interrupted by the signal that is ending the process).
  for (int i = 0; i < 10000 && g.active.load(std::memory_order_acquire) != 0; ++i) sched_yield();
  size_t n = 0;
  profile::CpuSamplingRecord& r = g.rec;
  r = {};
  const uint64_t kept = g.recs ? std::min<uint64_t>(g.claimed.load(std::memory_order_acquire), g.cap) : 0;
  if (was_on) {
    r.period_ns = g.period_ns;
    r.taken = kept;
    r.dropped = g.dropped.load(std::memory_order_relaxed);
    r.overruns = g.overruns.load(std::memory_order_relaxed);
    r.threads = g.threads.load(std::memory_order_relaxed);
    r.failed_threads = g.failed_threads.load(std::memory_order_relaxed);
    r.clock = uint32_t(profile::CpuClock::ThreadCpuTimer);
    r.signo = uint32_t(g.signo);
    out[n++] = {profile::Section::CpuSampling, sizeof r, 1, &r};
    out[n++] = {profile::Section::CpuSamples, sizeof(CpuSampleRecord), kept, g.recs};
  } else if (g.why_off[0] == 0) {
    return 0;  // never started (the runtime is off)
  }
  // A note when part or all of the program went unsampled.
  if (!was_on && g.why_off[0]) {
    std::snprintf(g.note, sizeof g.note,
                  "CPU time was not sampled: %s; the report cannot tell how much of the program's "
                  "time ran in code whymiss-cc did not instrument",
                  g.why_off);
  } else if (r.failed_threads) {
    const int e = g.first_errno.load();
    std::snprintf(g.note, sizeof g.note,
                  "CPU time of %u of %u threads was not sampled: their CPU-time timer could not be "
                  "created (%s)",
                  r.failed_threads, r.failed_threads + r.threads,
                  strerrorname_np(e) ? strerrorname_np(e) : "error");
  }
  if (g.note[0]) {
    g.note_rec = {strings.add(g.note), 1};
    if (g.note_rec.text_str != profile::kNoString)
      out[n++] = {profile::Section::Notes, sizeof g.note_rec, 1, &g.note_rec};
  }
  return n;
}

}  // namespace whymiss::rt::cpu
