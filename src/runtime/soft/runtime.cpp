// The soft-mode runtime core (libwhymiss-soft.so, LD_PRELOADed by `whymiss record --mode
// soft|pmu|auto`): time-weighted samples of the memory instructions an unmodified program runs.
//
// Configured by the environment the CLI sets: WHYMISS_OUTPUT (profile path; unset = off, the
// program runs normally), WHYMISS_PID (only that process records; descendants run unprofiled),
// WHYMISS_MODE (soft | pmu), WHYMISS_PERIOD_US (task-clock period), WHYMISS_CACHE (geometry for
// the profile; detected otherwise), WHYMISS_PMU_PLAN (pmu mode's events, from the CLI).
//
// Soft sampling: per thread a task-clock perf event (user time only) overflows every period of
// that thread's CPU time and sends the runtime's real-time signal to that very thread. The
// handler attributes the sample to the memory instruction before the interrupted RIP
// (soft::decode_previous), looks up the heap object and appends a SampleRecord to the thread's
// chunk of a fixed, mmap'ed store; every sample not kept is counted by DiscardReason. PMU mode
// (WHYMISS_MODE=pmu) uses pmu::LiveSampler's rings instead, drained by the collector thread; if
// it cannot start, the runtime falls back to soft sampling and says so in a note. The capture
// stage (soft/capture.h), when built in, shares the signal and is ticked by the collector.
//
// Safety contract: the handler is async-signal-safe (no heap, no stdio, no lock a program
// thread can hold while interrupted), preserves errno and ignores re-entry; nothing here throws
// across the C ABI; every failure to set something up is noted and the program runs on
// unsampled. A forked child runs unprofiled; exec starts over in the new image; exit() from any
// thread and death by a signal with default disposition write the profile (finish.cpp).
#include <asm/prctl.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "model/geometry.h"
#include "runtime/common/heap.h"
#include "runtime/common/inside.h"
#include "runtime/common/run_env.h"
#include "runtime/common/runtime_state.h"
#include "runtime/common/signal_guard.h"
#include "runtime/common/spinlock.h"
#include "runtime/pmu/live.h"
#include "runtime/pmu/plan.h"
#include "runtime/soft/decode.h"
#include "runtime/soft/runtime_internal.h"
#include "runtime/soft/sampler.h"
#include "runtime/soft/trace.h"
#if WHYMISS_HAVE_CAPTURE
#include "runtime/soft/capture.h"
#endif

namespace whymiss::rt::softrt {

constinit Global g;

namespace {

// Default task-clock period. Measured here (bench/README.md): a sample costs 55-75 us of the
// sampled thread's time on our loaded VMs, and the capture stage ~1 % more; at 1 ms the
// geometric-mean overhead was 11-13 %, so 2 ms (~4 % for sampling) keeps it under the 10 %
// target while a 1 s run still gives ~500 samples per busy thread.
constexpr uint64_t kDefaultPeriodUs = 2000;
constexpr size_t kMaxSamples = size_t(1) << 20;   // 48 MiB of address space, touched as used
constexpr size_t kDecodeArena = size_t(2) << 20;
constexpr uint64_t kCollectorTickNs = 5'000'000;

SpinLock g_tick_lock;  // the collector's tick, and fork()

thread_local ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local bool t_in_runtime __attribute__((tls_model("initial-exec"))) = false;
thread_local uint32_t t_preassigned __attribute__((tls_model("initial-exec"))) = 0;
thread_local bool t_collector __attribute__((tls_model("initial-exec"))) = false;

struct Inside : InsideScope {
  Inside() : InsideScope(t_in_runtime) {}
};

pid_t gettid_raw() { return pid_t(syscall(SYS_gettid)); }

void write_stderr(const char* a, const char* b = "", const char* c = "") {
  for (const char* s : {a, b, c}) {
    size_t n = std::strlen(s);
    while (n > 0) {
      ssize_t w = ::write(2, s, n);
      if (w <= 0) break;
      s += w;
      n -= size_t(w);
    }
  }
}


// ---- heap objects of samples ----

void mark_sampled(HeapObject& o, void* arg) {
  // An object is exported only when its statistics are non-zero; in a sampled profile the
  // estimator recomputes every miss field, so this count only marks "sampled at least once".
  __atomic_fetch_add(&o.misses[1], 1, __ATOMIC_RELAXED);
  *static_cast<uint64_t*>(arg) = o.serial;
}

// Serial of the heap object containing addr, 0 if none. Async-signal-safe: the object store's
// per-thread guard makes a lookup from a handler that interrupted the store answer "none".
uint64_t object_of(uint64_t addr) {
  uint64_t serial = 0;
  with_object(uintptr_t(addr), mark_sampled, &serial);
  return serial;
}

// ---- the signal handler ----

void discard(ThreadState* t, profile::DiscardReason r) { t->discarded[uint32_t(r)]++; }

void take_sample(ThreadState* t, ucontext_t* uc, const soft::RegisterView& rv) {
  t->in_handler.store(1, std::memory_order_seq_cst);
  if (g.state.load(std::memory_order_seq_cst) != kRecording) {
    t->in_handler.store(0, std::memory_order_release);
    return;
  }
  t->taken++;
  if (g.trace_on) soft::trace::check_lost(uc);
  // A thread in a trace window spends its time stepping: its samples would measure that.
  if (t_in_runtime || (g.trace_on && soft::trace::tracing())) {
    discard(t, profile::DiscardReason::InRuntime);
  } else {
    soft::MemAccess ma;
    soft::DecodeStatus st = soft::decode_previous(uint64_t(uc->uc_mcontext.gregs[REG_RIP]), rv, &ma);
#if WHYMISS_HAVE_CAPTURE
    // The capture stage's Int3 backend may have an int3 on that instruction's first byte right
    // now: decode the original bytes it saved instead.
    if (g.capture_on && st != soft::DecodeStatus::Ok && ma.ip != 0) {
      uint8_t code[16];
      if (size_t n = soft::capture::original_code(ma.ip, code, sizeof code))
        st = soft::decode_after_bytes(code, n, ma.ip, rv, &ma);
    }
#endif
    switch (st) {
      case soft::DecodeStatus::Ok: {
        profile::SampleRecord r{};
        r.time_ns = monotonic_ns();
        r.ip = ma.ip;
        r.addr = ma.ops[0].addr;
        r.size = ma.ops[0].size;
        r.flags = ma.ops[0].flags;
        r.level = profile::kLevelUnknown;
        r.weight = g.period_ns > UINT32_MAX ? UINT32_MAX : uint32_t(g.period_ns);
        r.thread = t->index;
        r.object = object_of(r.addr);
        if (!g.store.append(t->cursor, r)) {
          discard(t, profile::DiscardReason::BufferFull);
          break;
        }
        t->kept++;
#if WHYMISS_HAVE_CAPTURE
        if (g.capture_on) soft::capture::note_sample(r);
#endif
        break;
      }
      case soft::DecodeStatus::NotMemory: discard(t, profile::DiscardReason::NotMemory); break;
      case soft::DecodeStatus::Clobbered: discard(t, profile::DiscardReason::Clobbered); break;
      default: discard(t, profile::DiscardReason::NoDecode); break;
    }
    // The sample is the thread's cue to join an open trace epoch (it is running, and not in a
    // system call).
    if (g.trace_on) soft::trace::start_here(uc, t->index, t->fs_base, t->gs_base);
  }
  t->in_handler.store(0, std::memory_order_release);
}

// SA_SIGINFO handler of the runtime's signal. Signals sent by a process (si_code <= 0) belong to
// the program; kernel-sent ones (POLL_IN from an event) are the capture stage's or a sample.
void on_signal(int signo, siginfo_t* si, void* ctx) {
  const int saved = errno;
  if (si->si_code <= 0) {
    sig::forward(signo, si, ctx);
    errno = saved;
    return;
  }
  ThreadState* t = t_state;
  auto* uc = static_cast<ucontext_t*>(ctx);
  soft::RegisterView rv{uc, t ? t->fs_base : 0, t ? t->gs_base : 0};
#if WHYMISS_HAVE_CAPTURE
  if (g.capture_on && soft::capture::on_signal(si, rv, t ? t->index : 0)) {
    errno = saved;
    return;
  }
#endif
  // A signal of an event already closed (queued before close) or of another thread's event
  // (cannot happen with F_OWNER_TID, but costs nothing to check) is ignored.
  if (t && si->si_fd >= 0 && si->si_fd == t->fd.load(std::memory_order_relaxed)) take_sample(t, uc, rv);
  errno = saved;
}

// ---- threads ----

void note_open_failure(int err) {
  g.open_failures.fetch_add(1, std::memory_order_relaxed);
  int zero = 0;
  g.first_open_errno.compare_exchange_strong(zero, err);
}

// Sets up the calling thread: its index, its task-clock event, the capture stage and pmu rings.
ThreadState* attach_thread(uint32_t index) {
  if (g.state.load(std::memory_order_acquire) != kRecording) return nullptr;
  Inside in;
  void* mem = index < kMaxThreads ? private_alloc(sizeof(ThreadState)) : nullptr;
  if (!mem) {
    g.unrecorded_threads.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  auto* t = new (mem) ThreadState;
  t->index = index;
  t->tid = gettid_raw();
  unsigned long base = 0;
  if (syscall(SYS_arch_prctl, ARCH_GET_FS, &base) == 0) t->fs_base = base;
  if (syscall(SYS_arch_prctl, ARCH_GET_GS, &base) == 0) t->gs_base = base;
  t_state = t;  // before the event exists, so its first signal finds the thread
  g.threads[index].store(t, std::memory_order_release);
  pthread_setspecific(g.key, t);
  if (g.sampling) {
    int fd = soft::open_task_clock(t->tid, g.period_ns, g.signo);
    if (fd >= 0) t->fd.store(fd, std::memory_order_release);
    else note_open_failure(-fd);
  }
#if WHYMISS_HAVE_CAPTURE
  if (g.capture_on) soft::capture::add_thread(t->tid, index);
#endif
  if (g.pmu_mode) {
    if (int e = g.pmu->open_for_thread(t->tid); e != 0) note_open_failure(e);
  }
  return t;
}

// pthread key destructor: the thread is exiting. Its event is closed first, so no sample lands
// after; its state and samples stay for the profile.
void thread_exit(void* p) {
  auto* t = static_cast<ThreadState*>(p);
  if (!t) return;
  Inside in;
  int fd = t->fd.exchange(-1);
  if (fd >= 0) ::close(fd);
  if (g.state.load() == kRecording) {
#if WHYMISS_HAVE_CAPTURE
    if (g.capture_on) soft::capture::remove_thread(t->tid);
#endif
    if (g.pmu_mode) g.pmu->retire_thread(t->tid);
  }
  t->exited.store(true);
}

// ---- collector thread ----

int count_objects(dl_phdr_info* info, size_t size, void* arg) {
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    auto* v = static_cast<unsigned long long*>(arg);
    v[0] = info->dlpi_adds;
    v[1] = info->dlpi_subs;
  }
  return 1;  // one callback carries the counters
}

void* collector_main(void*) {
  t_in_runtime = true;  // everything it allocates is the runtime's
  t_collector = true;
  unsigned long long seen[2] = {0, 0};
  dl_iterate_phdr(count_objects, seen);
  while (!g.collector_stop.load(std::memory_order_acquire)) {
    timespec ts{0, long(kCollectorTickNs)};
    nanosleep(&ts, nullptr);
    LockGuard tick(g_tick_lock);  // held across the tick: fork() waits for it (before_fork)
    g.collector_busy.store(1, std::memory_order_seq_cst);
    if (g.collector_stop.load(std::memory_order_seq_cst) ||
        g.state.load(std::memory_order_seq_cst) != kRecording) {
      g.collector_busy.store(0, std::memory_order_release);
      break;
    }
    // A dlopen/dlclose since the last tick: new code the decoder must find functions in.
    unsigned long long now[2] = {seen[0], seen[1]};
    dl_iterate_phdr(count_objects, now);
    if (now[0] != seen[0] || now[1] != seen[1]) {
      // Breakpoints first: a page they made writable may belong to a library that went.
      if (g.trace_on) soft::trace::modules_changing();
      soft::refresh_modules();
      seen[0] = now[0];
      seen[1] = now[1];
    }
#if WHYMISS_HAVE_CAPTURE
    if (g.capture_on) soft::capture::tick(monotonic_ns());
#endif
    if (g.trace_on) soft::trace::tick(monotonic_ns());
    if (g.pmu_mode) g.pmu->drain();
    g.collector_busy.store(0, std::memory_order_release);
  }
  return nullptr;
}

using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

// Started with every signal but SIGTRAP blocked (it inherits the mask), so that neither the
// program's process-directed signals nor ours ever run on it; created with libc's pthread_create so it
// gets no thread index and no events.
void start_collector() {
  auto create = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
  if (!create) return;
  sigset_t all, old;
  sigfillset(&all);
  // Except SIGTRAP: the capture stage's Int3 backend arms no window while any thread of the
  // process has SIGTRAP blocked (a thread trapping on an int3 with it blocked is killed); this
  // thread never runs the program's code, so it never traps, and process-directed SIGTRAPs
  // (kill) get the same treatment here as on any thread.
  sigdelset(&all, SIGTRAP);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  g.collector_started = create(&g.collector, &attr, collector_main, nullptr) == 0;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!g.collector_started) add_note(1, "the collector thread could not start; no capture windows or pmu drain");
}

// ---- fork ----

// The collector's tick is held off across fork(): a child must not inherit a lock the collector
// held mid-tick (the loader's, in dl_iterate_phdr; the capture stage's or the pmu rings' state).
void before_fork() {
  g_tick_lock.lock();
  heap_before_fork();
}
void after_fork_parent() {
  heap_after_fork_parent();
  g_tick_lock.unlock();
}
// The child runs unprofiled (its parent's profile is the one being written): it forgets the
// parent's events without touching them. The descriptors it inherited refer to the parent's
// threads' events; closing them here only drops the child's references.
void after_fork_child() {
  heap_after_fork_child();
  g_tick_lock.reset();
  g.state.store(kDisabled);
  uint32_t n = g.next_index.load();
  if (n > kMaxThreads) n = kMaxThreads;
  for (uint32_t i = 0; i < n; ++i)
    if (ThreadState* t = g.threads[i].load()) {
      int fd = t->fd.exchange(-1);
      if (fd >= 0) ::close(fd);
    }
#if WHYMISS_HAVE_CAPTURE
  if (g.capture_on) soft::capture::forget_after_fork();
#endif
  if (g.trace_on) soft::trace::forget_after_fork();
  if (g.pmu_mode) g.pmu->forget_after_fork();
  g.store.forget();
}

// ---- start ----

// pmu samples arrive on the collector thread: map the kernel tid to our index, add the object.
void pmu_sink(void*, uint32_t tid, const profile::SampleRecord& rec) {
  static soft::SampleStore::Cursor cursor;  // the collector is the only writer
  uint32_t n = g.next_index.load(std::memory_order_acquire);
  if (n > kMaxThreads) n = kMaxThreads;
  ThreadState* owner = nullptr;
  for (uint32_t i = n; i-- > 0;)
    if (ThreadState* t = g.threads[i].load(std::memory_order_acquire); t && uint32_t(t->tid) == tid) {
      owner = t;
      break;
    }
  if (!owner) {
    g.pmu_unknown_thread.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  profile::SampleRecord r = rec;
  r.thread = owner->index;
  r.object = object_of(r.addr);
  if (g.store.append(cursor, r)) {
#if WHYMISS_HAVE_CAPTURE
    if (g.capture_on) soft::capture::note_sample(r);
#endif
  }
}

bool start_pmu() {
  const char* plan_text = std::getenv(pmu::kPlanEnv);
  if (!plan_text || !*plan_text) {
    add_note(1, "pmu mode was asked for without a PMU plan (WHYMISS_PMU_PLAN); fell back to soft sampling");
    return false;
  }
  auto plan = pmu::parse_plan(plan_text);
  if (!plan) {
    add_note(1, "pmu mode's plan could not be read; fell back to soft sampling");
    return false;
  }
  void* mem = private_alloc(sizeof(pmu::LiveSampler));
  if (!mem) return false;
  auto* live = new (mem) pmu::LiveSampler;
  int e = live->init(plan.value(), g.nlevels, 4096, uint64_t(g.pid) * 0x9e3779b97f4a7c15ull,
                     pmu::SampleSink{pmu_sink, nullptr});
  if (e != 0) {
    char msg[kNoteLen];
    std::snprintf(msg, sizeof msg, "the pmu sampler could not start (%s); fell back to soft sampling",
                  strerrordesc_np(e) ? strerrordesc_np(e) : "error");
    add_note(1, msg);
    live->~LiveSampler();
    private_free(mem);
    return false;
  }
  g.pmu = live;
  g.plan = plan.value();
  return true;
}

void set_geometry() {
  CacheGeometry geo;
  bool parsed = false;
  if (const char* spec = std::getenv("WHYMISS_CACHE"); spec && *spec) {
    if (auto r = parse_cache_spec(spec)) {
      geo = r.value();
      parsed = true;
    }
  }
  if (!parsed) geo = detect_geometry();
  g.nlevels = uint32_t(geo.levels.size() < size_t(profile::kLevels) ? geo.levels.size() : profile::kLevels);
  for (uint32_t l = 0; l < g.nlevels; ++l) {
    g.levels[l].size = geo.levels[l].size;
    g.levels[l].ways = geo.levels[l].ways;
    g.levels[l].line = geo.levels[l].line;
    std::strncpy(g.levels[l].name, geo.levels[l].name.c_str(), sizeof g.levels[l].name - 1);
  }
  std::strncpy(g.geometry_source, geo.source.c_str(), sizeof g.geometry_source - 1);
}

// The CLI refuses an out-of-range WHYMISS_PERIOD_US up front; a program started with the
// runtime preloaded by hand gets the default and a note saying so.
uint64_t period_from_env() {
  if (const char* p = std::getenv("WHYMISS_PERIOD_US"); p && *p) {
    char* end = nullptr;
    long v = std::strtol(p, &end, 10);
    if (*end == '\0' && v >= 100 && v <= 1000000) return uint64_t(v) * 1000;
    add_note(1, "WHYMISS_PERIOD_US is not a whole number from 100 to 1000000; the default period (2000 us) was used");
  }
  return kDefaultPeriodUs * 1000;
}

void finish(int term_signal);

// The executable segments of the module holding this function (the runtime itself).
struct CodeRange {
  uint64_t probe, lo, hi;
};
int find_own_code(dl_phdr_info* info, size_t, void* arg) {
  auto* r = static_cast<CodeRange*>(arg);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    const uint64_t a = info->dlpi_addr + ph.p_vaddr;
    lo = a < lo ? a : lo;
    hi = a + ph.p_memsz > hi ? a + ph.p_memsz : hi;
  }
  if (r->probe < lo || r->probe >= hi) return 0;
  r->lo = lo;
  r->hi = hi;
  return 1;
}

// The trace store's spill file (trace::Config::spill_fd): an unnamed file (O_TMPFILE, O_EXCL:
// it can never be given a name) in the profile's directory, so that no one sees it and it goes
// with the process. -1 where that fails (a file system without O_TMPFILE) or with
// WHYMISS_TRACE_SPILL=0: the traced accesses then stay in memory until exit. Errno preserved.
int open_spill_file() {
  if (const char* v = std::getenv("WHYMISS_TRACE_SPILL"); v && std::strcmp(v, "0") == 0) return -1;
  const int saved = errno;
  char dir[sizeof g.output];
  const char* slash = std::strrchr(g.output, '/');
  if (!slash) {
    std::strcpy(dir, ".");
  } else {
    const size_t n = slash == g.output ? 1 : size_t(slash - g.output);
    std::memcpy(dir, g.output, n);
    dir[n] = '\0';
  }
  const int fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
  errno = saved;
  return fd;
}

// Full-trace windows (soft/trace.h), unless WHYMISS_TRACE=0 (then the capture stage's
// breakpoint windows, as before them). They need SIGTRAP: a program that handles it keeps it.
void start_trace() {
  if (const char* v = std::getenv("WHYMISS_TRACE"); v && std::strcmp(v, "0") == 0) return;
  soft::trace::Config tc;
  tc.seed = uint64_t(g.pid) * 0x9e3779b97f4a7c15ull + g.start_ns;
  if (const char* v = std::getenv("WHYMISS_TRACE_STEPS"); v && *v) {
    long n = std::atol(v);
    if (n >= 100 && n <= 10'000'000) tc.steps = uint32_t(n);
  }
  if (const char* v = std::getenv("WHYMISS_TRACE_BUDGET"); v && *v) {
    long n = std::atol(v);
    if (n >= 1 && n <= 1000) tc.budget_permille = uint32_t(n);
  }
  if (const char* v = std::getenv("WHYMISS_TRACE_RUNS"); v && std::strcmp(v, "0") == 0) tc.runs = false;
  if (const char* v = std::getenv("WHYMISS_LOCK_PERIOD_TICKS"); v && *v) {
    long n = std::atol(v);
    if (n >= 1 && n <= 1'000'000) tc.lock_period_ticks = uint32_t(n);
  }
  // Windows go on until they reach twice the L1's lines (see trace.h).
  if (g.nlevels && g.levels[0].line && g.levels[0].size) {
    tc.target_lines = uint32_t(2 * g.levels[0].size / g.levels[0].line);
    tc.line_shift = uint32_t(__builtin_ctz(g.levels[0].line));
  }
  tc.max_steps = tc.steps * 5 / 2;
  // The program's SIGTRAP requests are kept aside from now on (a thread that sets SIG_IGN while
  // another steps would get the process killed): traps that are not ours go to what it asked.
  tc.forward = sig::forward;
  tc.program_owns = [] { return sig::program_claimed(SIGTRAP); };
  tc.identify = [](uint32_t* index, uint64_t* fs, uint64_t* gs) {
    ThreadState* t = t_state;
    if (!t || t_in_runtime || t_collector || g.state.load(std::memory_order_relaxed) != kRecording) return false;
    *index = t->index;
    *fs = t->fs_base;
    *gs = t->gs_base;
    return true;
  };
  CodeRange own{reinterpret_cast<uint64_t>(&find_own_code), 0, 0};
  dl_iterate_phdr(find_own_code, &own);
  tc.spill_fd = open_spill_file();
  const int e = soft::trace::init(tc, object_of, own.lo, own.hi);
  if (e != 0 && tc.spill_fd >= 0) close(tc.spill_fd);
  if (e == 0) {
    sig::reserve(SIGTRAP);
    if (tc.runs) sig::keep_unblocked(SIGTRAP);  // runs put int3 breakpoints in the program's code
    g.trace_on = true;
    return;
  }
  char msg[kNoteLen];
  if (e == EBUSY)
    std::snprintf(msg, sizeof msg, "no trace windows: the program (or a debugger) handles SIGTRAP, which "
                  "single-stepping needs; misses are modelled from samples and breakpoint windows");
  else
    std::snprintf(msg, sizeof msg, "no trace windows (%s); misses are modelled from samples and breakpoint windows",
                  strerrordesc_np(e) ? strerrordesc_np(e) : "error");
  add_note(1, msg);
}

void init() {
  int expected = kOff;
  if (!g.state.compare_exchange_strong(expected, kInitialising)) return;
  Inside in;
  if (!profile_output_from_env(g.output, sizeof g.output)) {
    g.state.store(kDisabled);
    return;
  }
  g.pid = getpid();
  g.start_ns = realtime_ns();
  read_command_line(g.command, sizeof g.command);
  set_geometry();
  g.period_ns = period_from_env();
  if (int e = g.store.init(kMaxSamples); e != 0) {
    add_note(1, "the sample store could not be mapped; nothing was sampled");
  }
  pthread_key_create(&g.key, thread_exit);
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);

  // One real-time signal for every event of whymiss (samples and the capture stage's traps).
  g.signo = soft::pick_signal();
  bool handler_ok = false;
  if (g.signo == 0) {
    add_note(1, "no free real-time signal (all have handlers or are blocked); nothing was sampled");
  } else {
    struct sigaction sa {};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);  // the signal itself is blocked while its handler runs
    handler_ok = sig::real_sigaction(g.signo, &sa, nullptr) == 0;
    if (handler_ok) sig::reserve(g.signo);
    else add_note(1, "the sampling signal's handler could not be installed; nothing was sampled");
  }
  const char* mode = std::getenv("WHYMISS_MODE");
  if (mode && std::strcmp(mode, "pmu") == 0) g.pmu_mode = start_pmu();
  if (handler_ok && !soft::init(kDecodeArena)) {
    add_note(1, "the instruction decoder could not read the loaded modules; nothing was sampled");
    handler_ok = false;
  }
  g.sampling = handler_ok && !g.pmu_mode;
  if (g.sampling) start_trace();
#if WHYMISS_HAVE_CAPTURE
  if (handler_ok && !g.trace_on) {
    soft::capture::Config cc;
    cc.signo = g.signo;
    // Longer windows than the stage's default (256 captures, 20 ms), at the same trap-time budget
    // (fewer windows): the replay cannot tell what happened to a line a window touches first, so
    // the larger the window, the smaller that unknown share. A column walk of 64 rows reuses its
    // lines over 8 columns: 256 captures left a quarter to half of them first touches, 512 leave
    // an eighth to a quarter.
    cc.captures_per_window = 512;
    cc.window_ns = 40'000'000;
    // Half the stage's default trap-time budget (1 % of run time): with the int3 backend a hit
    // costs 25-40 us here, and the 2 ms task-clock samples already take ~4 %; the overhead
    // target (10 % geometric mean, bench/README.md) holds only with the stage at ~1 %.
    cc.budget_permille = 10;
    if (int e = soft::capture::init(cc, object_of); e == 0) {
      g.capture_on = true;
    } else {
      char msg[kNoteLen];
      if (e == ENODEV)
        std::snprintf(msg, sizeof msg, "the capture stage is unavailable: this machine accepts hardware "
                      "breakpoints but never fires them (docs/soft-capture.md); misses are modelled "
                      "from samples only");
      else
        std::snprintf(msg, sizeof msg, "the capture stage could not start (%s); misses are modelled from samples only",
                      strerrordesc_np(e) ? strerrordesc_np(e) : "error");
      add_note(1, msg);
    }
  }
#else
  add_note(0, "this build has no capture stage (breakpoint windows); misses are modelled from samples only");
#endif
  sig::install_fatal_guards(finish, g.pid);
  g.state.store(kRecording, std::memory_order_release);

  // The main thread, then one clear sentence if the kernel refuses the event.
  ThreadState* main_thread = attach_thread(g.next_index.fetch_add(1));
  if (g.pmu_mode && g.first_open_errno.load() != 0) {
    // The plan the CLI detected does not open here (e.g. another machine's plan, or a VM whose
    // PMU went away): sample time instead, as auto mode would have chosen.
    char msg[kNoteLen];
    const char* why = strerrordesc_np(g.first_open_errno.load());
    std::snprintf(msg, sizeof msg, "the pmu events of the plan could not be opened (%s); fell back to soft sampling",
                  why ? why : "error");
    add_note(1, msg);
    g.pmu_mode = false;
    g.pmu->close_all();
    g.first_open_errno.store(0);
    g.open_failures.store(0);
    g.sampling = handler_ok;
    if (g.sampling && main_thread) {
      int fd = soft::open_task_clock(main_thread->tid, g.period_ns, g.signo);
      if (fd >= 0) main_thread->fd.store(fd, std::memory_order_release);
      else note_open_failure(-fd);
    }
  }
  if (g.sampling && g.first_open_errno.load() != 0) {
    char msg[kNoteLen];
    soft::refusal_message(g.first_open_errno.load(), soft::read_perf_paranoid(), msg, sizeof msg);
    write_stderr("whymiss: ", msg, "\n");
    add_note(1, msg);
    g.sampling = false;  // do not retry for every thread
  }
  start_collector();
}

void finish(int term_signal) {
  int expected = kRecording;
  if (!g.state.compare_exchange_strong(expected, kFinished)) return;
  if (getpid() != g.pid) return;
  Inside in;
  // No new trace windows; threads still stepping end theirs at their next step.
  if (g.trace_on) soft::trace::stop();
  // Quiesce: the collector finishes its tick (unless this is the collector), handlers in flight
  // on other threads finish their sample. Both are bounded waits: a thread stopped for good
  // mid-handler (e.g. by a debugger) must not keep the profile from being written.
  g.collector_stop.store(true, std::memory_order_seq_cst);
  if (!t_collector)
    for (int spin = 0; g.collector_busy.load(std::memory_order_seq_cst) && spin < 200000; ++spin) sched_yield();
  uint32_t n = g.next_index.load();
  if (n > kMaxThreads) n = kMaxThreads;
  for (uint32_t i = 0; i < n; ++i) {
    ThreadState* t = g.threads[i].load(std::memory_order_acquire);
    if (!t || t == t_state) continue;
    for (int spin = 0; t->in_handler.load(std::memory_order_seq_cst) && spin < 200000; ++spin) sched_yield();
  }
  write_profile(term_signal);
}

__attribute__((constructor(101))) void runtime_ctor() { init(); }
__attribute__((destructor(101))) void runtime_dtor() { finish(0); }

}  // namespace

void add_note(uint32_t severity, const char* text) {
  int i = g.nnotes.fetch_add(1);
  if (i >= kMaxNotes) {
    g.nnotes.store(kMaxNotes);
    return;
  }
  std::strncpy(g.notes[i], text, kNoteLen - 1);
  g.note_severity[i] = severity;
}

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace whymiss::rt::softrt

// ---- what the shared runtime pieces (heap hooks, pthread_create hook) need from the core ----
namespace whymiss::rt {
using softrt::g;

uint32_t current_thread_index() noexcept {
  if (softrt::ThreadState* t = softrt::t_state) return t->index;
  uint32_t index = softrt::t_preassigned ? softrt::t_preassigned - 1 : g.next_index.fetch_add(1);
  softrt::ThreadState* t = softrt::attach_thread(index);
  return t ? t->index : 0;
}
bool in_runtime() noexcept { return softrt::t_in_runtime; }
void heap_detach_fence() noexcept {}  // samples are attributed as they arrive
bool set_in_runtime(bool inside) noexcept {
  bool was = softrt::t_in_runtime;
  softrt::t_in_runtime = inside;
  return was;
}
bool recording() noexcept { return g.state.load(std::memory_order_relaxed) == softrt::kRecording; }

// Called first thing in every thread started through pthread_create (common/thread_hooks.cpp):
// the thread gets its index (reserved by its creator, so indices follow creation order) and its
// event before it runs any of the program's code.
void preassign_thread_index(uint32_t index_plus_one) noexcept {
  softrt::t_preassigned = index_plus_one;
  if (!softrt::t_state && index_plus_one) softrt::attach_thread(index_plus_one - 1);
}
uint32_t next_thread_index() noexcept { return g.next_index.fetch_add(1) + 1; }

}  // namespace whymiss::rt
