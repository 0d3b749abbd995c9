// The capture stage: set-up, thread tracking, the signal path and the results (capture.h).
// Scheduling is in capture_sched.cpp, the perf events in capture_events.cpp.
#include "runtime/soft/capture.h"

#include <asm/prctl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>

#include "runtime/soft/capture_internal.h"

namespace whymiss::soft::capture {

namespace detail {
namespace {
// Constant-initialised (no guard variable): a handler may look at it before init ran.
constinit State g_state{};
}  // namespace
State& g() { return g_state; }
}  // namespace detail

using namespace detail;

namespace {

struct ErrnoGuard {
  int saved = errno;
  ~ErrnoGuard() { errno = saved; }
};

size_t align_up(size_t n) { return (n + 63) & ~size_t(63); }

bool valid(const Config& c) {
  return c.signo > 0 && c.signo < 65 && c.max_threads > 0 && c.max_threads <= (1u << 24) &&
         c.slots > 0 && c.slots <= kMaxSlots && c.captures_per_window > 0 &&
         c.captures_per_window <= (1u << 30) && c.window_ns > 0 && c.max_windows > 0 &&
         c.max_windows < kNone && c.max_captures > 0 && c.max_captures <= (1u << 30);
}

void unmap(State& s) {
  s.ready.store(false, std::memory_order_release);
  if (s.map) munmap(s.map, s.map_bytes);
  s.map = nullptr;
  s.map_bytes = 0;
}

// The entry of a live thread with this tid, or kNone. Entries are read only once their state
// says they are claimed (the tid is written before the state is published).
uint32_t find_thread(pid_t tid) {
  State& s = g();
  const uint32_t hw = s.thread_hw.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < hw; ++i) {
    const uint32_t st = s.threads[i].state.load(std::memory_order_acquire);
    if ((st == kLive || st == kBusy) && s.threads[i].tid == tid) return i;
  }
  return kNone;
}

// Appends one record to the calling thread's buffer (handler of that thread only).
bool append(Thread& t, const profile::CaptureRecord& r) {
  State& s = g();
  if (s.captures.load(std::memory_order_relaxed) >= s.cfg.max_captures) return false;
  uint32_t c = t.chunk;
  if (c == 0 || s.chunk_heads[c - 1].count.load(std::memory_order_relaxed) == kChunk) {
    const uint32_t n = s.next_chunk.fetch_add(1, std::memory_order_relaxed);
    if (n >= s.nchunks) return false;
    ChunkHead& h = s.chunk_heads[n];
    h.thread = t.index;
    h.next = 0;
    h.first = c == 0 ? 1 : 0;
    h.count.store(0, std::memory_order_relaxed);
    if (c) s.chunk_heads[c - 1].next = n + 1;
    t.chunk = c = n + 1;
  }
  ChunkHead& h = s.chunk_heads[c - 1];
  const uint32_t k = h.count.load(std::memory_order_relaxed);
  s.records[size_t(c - 1) * kChunk + k] = r;
  h.count.store(k + 1, std::memory_order_release);
  s.captures.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// The operands a trap records: every operand of an execution breakpoint's instruction; for a
// watchpoint, the operands overlapping the watched word (the trap came from one of them).
bool record(Thread& t, Window& w, uint32_t win, const MemAccess& m, uint64_t time) {
  State& s = g();
  bool any = false;
  for (int i = 0; i < m.count; ++i) {
    const MemOperand& op = m.ops[i];
    if (w.reason == 1 && (op.addr >= w.word + 8 || op.addr + op.size <= w.word)) continue;
    profile::CaptureRecord r{};
    r.time_ns = time;
    r.ip = m.ip;
    r.addr = op.addr;
    r.object = s.lookup ? s.lookup(op.addr) : 0;
    r.thread = t.index;
    r.window = win;
    r.size = op.size;
    r.flags = op.flags;
    if (!append(t, r)) return false;
    w.captures.fetch_add(1, std::memory_order_relaxed);
    any = true;
  }
  return any;
}

}  // namespace

namespace detail {
bool int3_capture(uint32_t w, const uint8_t* code, uint8_t len, uint64_t ip, const ucontext_t* uc,
                  pid_t tid, uint64_t fs_base) {
  State& s = g();
  if (!s.ready.load(std::memory_order_acquire) || !s.on.load(std::memory_order_acquire)) return false;
  const uint32_t e = find_thread(tid);
  if (e == kNone || w >= s.cfg.max_windows) return false;  // untracked thread: stepped over only
  Thread& t = s.threads[e];
  uint32_t slot = kNone;
  for (uint32_t k = 0; k < kMaxSlots; ++k)
    if (t.fd[k] == kSoftFd && t.window[k] == w) slot = k;
  if (slot == kNone) return false;  // joins the window at the next tick
  const uint32_t hits = t.hits[slot].fetch_add(1, std::memory_order_relaxed) + 1;
  if (hits > s.cfg.captures_per_window) return false;
  Window& win = s.windows[w];
  const uint64_t time = now_ns();
  RegisterView rv;
  rv.uc = uc;
  rv.fs_base = fs_base;
  MemAccess m;
  if (decode_bytes(code, len, ip, rv, &m) != DecodeStatus::Ok || !record(t, win, w, m, time)) {
    win.dropped.fetch_add(1, std::memory_order_relaxed);
    s.dropped.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}
}  // namespace detail

int init(const Config& c, ObjectLookup lookup) {
  ErrnoGuard eg;
  State& s = g();
  int err = valid(c) ? 0 : EINVAL;
  // Backend: debug registers if they fire (or unprobed: tests emulating them), else int3.
  auto be = profile::CaptureBackend::HwBreakpoint;
  if (!err && c.force_int3) {
    be = profile::CaptureBackend::Int3;
  } else if (!err && c.probe) {
    err = probe_hardware();
    if (err && c.allow_int3) err = 0, be = profile::CaptureBackend::Int3;
  }
  if (!err && be == profile::CaptureBackend::Int3) err = int3_install();
  if (err) {
    stop();  // a stage set up before stays off too: "then the stage stays off"
    s.backend.store(uint32_t(profile::CaptureBackend::None), std::memory_order_relaxed);
    return err;
  }
  if (s.map) {  // re-initialisation (tests): only once nothing can be running
    stop();
    unmap(s);
  }
  const uint32_t nchunks = (c.max_captures + kChunk - 1) / kChunk;
  const size_t o_threads = 0;
  const size_t o_windows = o_threads + align_up(sizeof(Thread) * c.max_threads);
  const size_t o_heads = o_windows + align_up(sizeof(Window) * c.max_windows);
  const size_t o_records = o_heads + align_up(sizeof(ChunkHead) * nchunks);
  const size_t o_fds = o_records + align_up(sizeof(profile::CaptureRecord) * kChunk * nchunks);
  const size_t o_hot = o_fds + align_up(sizeof(std::atomic<uint64_t>) * kFdTable);
  const size_t o_lines = o_hot + align_up(sizeof(HotEntry) * kHotEntries);
  const size_t bytes = o_lines + align_up(sizeof(LineEntry) * kLineEntries);
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return errno;
  auto* base = static_cast<uint8_t*>(m);
  s.cfg = c;
  if (be == profile::CaptureBackend::Int3) s.cfg.watchpoints = false;  // no software watchpoints
  s.backend.store(uint32_t(be), std::memory_order_relaxed);
  s.pid = getpid();
  s.child_restore.store(0, std::memory_order_relaxed);
  s.gen.fetch_add(1, std::memory_order_relaxed);
  s.int3_passed.store(0);
  s.int3_bounces.store(0);
  s.int3_stale.store(0);
  s.sigtrap_blocked.store(0);
  s.sigtrap_taken.store(0);  // (sigtrap_owned counts refused inits: not reset)
  if (be == profile::CaptureBackend::Int3) int3_mark_owner();
  s.lookup = lookup;
  s.map = m;
  s.map_bytes = bytes;
  s.threads = reinterpret_cast<Thread*>(base + o_threads);
  s.windows = reinterpret_cast<Window*>(base + o_windows);
  s.chunk_heads = reinterpret_cast<ChunkHead*>(base + o_heads);
  s.records = reinterpret_cast<profile::CaptureRecord*>(base + o_records);
  s.fds = reinterpret_cast<std::atomic<uint64_t>*>(base + o_fds);
  s.hot = reinterpret_cast<HotEntry*>(base + o_hot);
  s.lines = reinterpret_cast<LineEntry*>(base + o_lines);
  s.nchunks = nchunks;
  // The mapping is zero-filled; construct the atomics in place (windows and chunk heads are
  // constructed when first used, records are plain data).
  for (uint32_t i = 0; i < c.max_threads; ++i) {
    Thread* t = new (&s.threads[i]) Thread{};
    for (uint32_t k = 0; k < kMaxSlots; ++k) t->fd[k] = -1, t->window[k] = kNone;
  }
  for (uint32_t i = 0; i < kFdTable; ++i) new (&s.fds[i]) std::atomic<uint64_t>(0);
  for (uint32_t i = 0; i < kHotEntries; ++i) new (&s.hot[i]) HotEntry{};
  for (uint32_t i = 0; i < kLineEntries; ++i) {
    LineEntry* l = new (&s.lines[i]) LineEntry{};
    l->first_thread.store(kNone, std::memory_order_relaxed);
  }
  s.next_chunk.store(0);
  s.nwindows.store(0);
  s.thread_hw.store(0);
  s.captures.store(0);
  s.dropped.store(0);
  s.open_failures.store(0);
  s.rejected.store(0);
  s.watch_windows.store(0);
  s.first_errno.store(0);
  s.sched_busy.store(false);
  sched_reset(now_ns());
  s.ready.store(true, std::memory_order_release);
  s.on.store(true, std::memory_order_release);
  return 0;
}

int add_thread(pid_t tid, uint32_t thread_index) {
  ErrnoGuard eg;
  State& s = g();
  if (!s.ready.load(std::memory_order_acquire)) return EINVAL;
  for (uint32_t i = 0; i < s.cfg.max_threads; ++i) {
    Thread& t = s.threads[i];
    uint32_t expect = kFree;
    if (!t.state.compare_exchange_strong(expect, kLeaving, std::memory_order_acquire)) continue;
    t.tid = tid;
    t.index = thread_index;
    t.chunk = 0;
    for (uint32_t k = 0; k < kMaxSlots; ++k) {
      t.fd[k] = -1;
      t.window[k] = kNone;
      t.hits[k].store(0, std::memory_order_relaxed);
    }
    uint32_t hw = s.thread_hw.load(std::memory_order_relaxed);
    while (hw < i + 1 && !s.thread_hw.compare_exchange_weak(hw, i + 1)) {
    }
    t.state.store(kLive, std::memory_order_release);
    return 0;
  }
  return ENOSPC;
}

void remove_thread(pid_t tid) {
  ErrnoGuard eg;
  State& s = g();
  if (!s.ready.load(std::memory_order_acquire)) return;
  const uint32_t e = find_thread(tid);
  if (e == kNone) return;
  Thread& t = s.threads[e];
  // The collector holds the entry only for a few syscalls (kBusy): wait it out.
  for (;;) {
    uint32_t expect = kLive;
    if (t.state.compare_exchange_strong(expect, kLeaving, std::memory_order_acquire)) break;
    if (expect != kBusy) return;
    sched_yield();
  }
  for (uint32_t k = 0; k < kMaxSlots; ++k) disarm_event(e, k);
  t.state.store(kFree, std::memory_order_release);
}

bool on_signal(const siginfo_t* si, const RegisterView& regs, uint32_t thread_index) {
  ErrnoGuard eg;
  State& s = g();
  if (!si || !s.ready.load(std::memory_order_acquire)) return false;
  // F_SETSIG signals of an fd carry a POLL_* code (POLL_IN..POLL_HUP) and si_fd; others do not.
  if (si->si_code < POLL_IN || si->si_code > POLL_HUP) return false;
  const int fd = si->si_fd;
  if (fd < 0 || fd >= int(kFdTable)) return false;
  const uint64_t v = s.fds[fd].load(std::memory_order_acquire);
  if (!v) return false;  // not ours, or closed since (a late signal): the runtime's to handle
  const uint32_t e = fd_entry(v), slot = fd_slot(v), win = fd_window(v);
  if (e >= s.cfg.max_threads || win >= s.cfg.max_windows || slot >= kMaxSlots) return false;
  Thread& t = s.threads[e];
  // Signals go to the watched thread only; another thread means the number was reused.
  if (t.index != thread_index) return false;
  Window& w = s.windows[win];
  const uint64_t rip = regs.uc ? uint64_t(regs.uc->uc_mcontext.gregs[REG_RIP]) : 0;
  // The fd is ours now (the table is cleared before every close), so the signal is too (at
  // worst it was queued by a previous owner of the number, whose signals nobody wants). It is
  // counted as a hit, for the window's end, but stored only if its context is the trap's: an
  // execution breakpoint's signal is delivered with rip on its instruction, unless the thread
  // had the signal blocked and takes it later, elsewhere.
  const uint32_t hits = t.hits[slot].fetch_add(1, std::memory_order_relaxed) + 1;
  if (hits > s.cfg.captures_per_window || !regs.uc || (w.reason == 0 && rip != w.ip)) {
    w.dropped.fetch_add(1, std::memory_order_relaxed);
    s.dropped.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  const uint64_t time = now_ns();
  MemAccess m;
  DecodeStatus st;
  if (w.reason == 0) {
    st = decode_at(rip, regs, &m);
  } else {
    st = decode_previous(rip, regs, &m);
    if (st == DecodeStatus::Clobbered) {
      // The access overwrote its own address register (mov (%rax),%rax): a load of the word;
      // the word itself is what the watchpoint saw.
      m.count = 1;
      m.ops[0] = MemOperand{w.word, 8, profile::kAccessRead};
      st = DecodeStatus::Ok;
    }
  }
  if (st != DecodeStatus::Ok || !record(t, w, win, m, time)) {
    w.dropped.fetch_add(1, std::memory_order_relaxed);
    s.dropped.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

void stop() {
  ErrnoGuard eg;
  State& s = g();
  if (!s.ready.load(std::memory_order_acquire)) return;
  s.on.store(false, std::memory_order_release);
  // Wait for a tick in progress on the collector thread (a few syscalls).
  while (s.sched_busy.exchange(true, std::memory_order_acquire)) sched_yield();
  end_all_windows(now_ns());
  s.sched_busy.store(false, std::memory_order_release);
}

void forget_after_fork() {
  ErrnoGuard eg;
  State& s = g();
  if (!s.ready.load(std::memory_order_acquire)) return;
  // Only the forking thread exists here; the parent's events follow the parent's threads (they
  // are not inherited), so closing our copies of the fds is all that is left to do.
  s.on.store(false, std::memory_order_release);
  s.ready.store(false, std::memory_order_release);
  s.sched_busy.store(false, std::memory_order_relaxed);
  if (s.backend.load(std::memory_order_relaxed) == uint32_t(profile::CaptureBackend::Int3))
    int3_restore_in_child();  // the code pages came patched
  for (uint32_t i = 0; i < s.cfg.max_threads; ++i) {
    Thread& t = s.threads[i];
    for (uint32_t k = 0; k < kMaxSlots; ++k) {
      if (t.fd[k] >= 0 && t.fd[k] != kSoftFd) {
        if (t.fd[k] < int(kFdTable)) s.fds[t.fd[k]].store(0, std::memory_order_relaxed);
        close(t.fd[k]);
      }
      t.fd[k] = -1;
    }
    t.state.store(kFree, std::memory_order_relaxed);
  }
}

size_t window_count() {
  State& s = g();
  return s.map ? s.nwindows.load(std::memory_order_acquire) : 0;
}

size_t capture_count() {
  State& s = g();
  if (!s.map) return 0;
  const uint32_t n = std::min(s.next_chunk.load(std::memory_order_acquire), s.nchunks);
  size_t total = 0;
  for (uint32_t i = 0; i < n; ++i) total += s.chunk_heads[i].count.load(std::memory_order_acquire);
  return total;
}

size_t export_windows(profile::WindowRecord* out, size_t max) {
  State& s = g();
  const size_t n = std::min(window_count(), max);
  for (size_t i = 0; i < n; ++i) {
    const Window& w = s.windows[i];
    profile::WindowRecord r{};
    r.ip = w.ip;
    r.start_ns = w.start_ns;
    r.end_ns = w.open ? now_ns() : w.end_ns;
    r.captures = w.captures.load(std::memory_order_relaxed);
    r.dropped = w.dropped.load(std::memory_order_relaxed);
    r.reason = w.reason;
    out[i] = r;
  }
  return n;
}

// Each thread's chunks form a chain in time order, started by a chunk marked `first`; chains are
// emitted one after the other, so captures come grouped by thread in time order.
size_t export_captures(profile::CaptureRecord* out, size_t max) {
  State& s = g();
  if (!s.map) return 0;
  const uint32_t n = std::min(s.next_chunk.load(std::memory_order_acquire), s.nchunks);
  size_t k = 0;
  for (uint32_t i = 0; i < n && k < max; ++i) {
    if (!s.chunk_heads[i].first) continue;
    for (uint32_t c = i + 1; c && k < max; c = s.chunk_heads[c - 1].next) {
      const ChunkHead& h = s.chunk_heads[c - 1];
      const uint32_t cnt = h.count.load(std::memory_order_acquire);
      for (uint32_t j = 0; j < cnt && k < max; ++j) out[k++] = s.records[size_t(c - 1) * kChunk + j];
    }
  }
  return k;
}

size_t original_code(uint64_t ip, uint8_t* out, size_t max) { return int3_original_code(ip, out, max); }

profile::CaptureBackend backend() {
  return profile::CaptureBackend(g().backend.load(std::memory_order_relaxed));
}

Stats stats() {
  State& s = g();
  Stats r;
  r.sigtrap_owned = s.sigtrap_owned.load(std::memory_order_relaxed);
  if (!s.map) return r;
  r.int3_passed = s.int3_passed.load(std::memory_order_relaxed);
  r.int3_bounces = s.int3_bounces.load(std::memory_order_relaxed);
  r.int3_stale = s.int3_stale.load(std::memory_order_relaxed);
  r.sigtrap_blocked = s.sigtrap_blocked.load(std::memory_order_relaxed);
  r.sigtrap_taken = s.sigtrap_taken.load(std::memory_order_relaxed);
  r.windows = s.nwindows.load(std::memory_order_relaxed);
  r.watch_windows = s.watch_windows.load(std::memory_order_relaxed);
  r.captures = s.captures.load(std::memory_order_relaxed);
  r.dropped = s.dropped.load(std::memory_order_relaxed);
  r.open_failures = s.open_failures.load(std::memory_order_relaxed);
  r.first_errno = s.first_errno.load(std::memory_order_relaxed);
  r.rejected = s.rejected.load(std::memory_order_relaxed);
  return r;
}

}  // namespace whymiss::soft::capture
