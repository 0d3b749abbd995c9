// Full-trace windows (see trace.h for the contract and the protocol).
//
// Storage: windows live in a fixed array (one slot per window, written only by the thread that
// steps it); accesses in chunks of a pool, each chunk claimed by one window (a bit in a bitmap,
// lowest free first) and written by its thread, its fill count release-stored after every
// record, so export reads only whole records even while a thread is still stepping. With a
// spill file (Config::spill_fd) the collector writes every finished chunk (full, or its window
// ended) to the file and frees it, so the pool's resident part stays at the few chunks being
// filled: memory does not grow with the number of windows. Export merges both, by window and
// then by chunk sequence. Everything is mapped at init.
#include "runtime/soft/trace.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>

#include "runtime/soft/decode.h"
#include "runtime/soft/modules.h"
#include "runtime/soft/proc_self.h"
#include "runtime/soft/sigtrap.h"
#include "runtime/soft/trace_patches.h"

namespace whymiss::soft::trace {
namespace {

constexpr greg_t kTrapFlag = 0x100;
constexpr uint32_t kChunk = 2048;

struct Window {
  uint64_t start_ns;
  uint64_t start_cpu_ns;  // the thread's CPU time when it started
  std::atomic<uint64_t> end_ns;
  uint32_t thread, epoch;
  std::atomic<uint32_t> steps, dropped, skipped, end;
};

// Where a window's chunk is: its window and its place among the window's chunks.
struct ChunkOwner {
  uint32_t window, seq;
};
// A chunk written to the spill file: recs (count records) at offset, then their times.
struct Spilled {
  uint32_t window, seq, count, pad;
  uint64_t offset;
};
// Export: one chunk's worth of a window's accesses, in memory (chunk) or in the spill file.
struct Piece {
  uint32_t window, seq, count, chunk;  // chunk: kNoChunk when spilled
  uint64_t offset;
};
constexpr uint32_t kNoChunk = ~0u;
constexpr uint32_t kFree = ~0u;  // chunk_used of a chunk no window has published yet

struct State {
  Config cfg;
  ObjectLookup lookup = nullptr;
  uint64_t own_lo = 0, own_hi = 0;
  pid_t pid = 0;
  bool installed = false;
  Window* windows = nullptr;
  std::atomic<uint32_t> nwindows{0};
  profile::TraceAccessRecord* recs = nullptr;
  uint64_t* times = nullptr;  // when each slot of recs ran (CLOCK_MONOTONIC ns)
  std::atomic<uint32_t>* chunk_used = nullptr;
  ChunkOwner* owner = nullptr;         // per chunk, written by the thread that claimed it
  std::atomic<uint64_t>* busy = nullptr;  // bitmap: claimed and not yet spilled
  uint32_t nchunks = 0;                // the pool
  // Accesses the store may still take (cfg.max_accesses at init): a chunk reserves kChunk when
  // claimed, and its window gives back what it left unused when it ends.
  std::atomic<int64_t> room{0};
  // The spill file (-1: none, or given up after a failed write) and what went there. Written
  // by the collector only; export reads it after stop().
  int spill_fd = -1;
  int spill_fd_read = -1;  // the same file, kept for export after a failed write
  uint64_t spill_dev = 0, spill_ino = 0;  // its identity: the program may close the descriptor
  Spilled* spilled = nullptr;
  uint32_t max_spilled = 0;
  std::atomic<uint32_t> nspilled{0};
  uint64_t spill_end = 0;
  std::atomic<uint64_t> spilled_accesses{0};
  std::atomic<uint64_t> spill_errno{0};
  // Export scratch: the pieces of the snapshot, in export order, and accesses per window.
  Piece* pieces = nullptr;
  uint32_t npieces = 0;
  uint32_t* per_window = nullptr;
  uint64_t snapshot_accesses = 0;
  bool snapshot = false;  // export_windows took it; export_accesses and write_* use the same
  uint8_t* io = nullptr;  // one chunk's records or times read back from the spill file
  size_t mapped = 0;
  void* base = nullptr;
  std::atomic<uint32_t> epoch{0};
  std::atomic<uint64_t> epoch_end{0};
  std::atomic<uint32_t> joined{0};  // windows started in the current epoch
  // Windows of one epoch still being stepped: epoch << 32 | count. While one is, the epoch stays
  // open for threads that have not joined yet (on a busy machine the others may not run within
  // epoch_ns, and an epoch that traced one thread shows no sharing), and the next epoch waits,
  // up to kHoldNs past the epoch's end (a thread that died stepping never ends its window).
  std::atomic<uint64_t> stepping{0};
  std::atomic<bool> stopped{false};
  std::atomic<uint64_t> step_cost_ns{0};
  std::atomic<uint64_t> window_cost_ns{0};  // what a window costs its thread (measured)
  std::atomic<bool> cost_measured{false};   // the costs above are measures, not the guess
  uint32_t sketch_target = 0;  // bits set in a sketch once target_lines distinct lines were seen
  std::atomic<uint64_t> epochs{0}, dropped{0}, stray{0};
  // Runs (trace.h): whether this epoch may put breakpoints (no thread blocked SIGTRAP when it
  // opened), and counts for the note.
  std::atomic<bool> runs_now{false};
  std::atomic<uint64_t> run_traps{0}, run_steps{0}, single_steps{0};
  std::atomic<uint64_t> last_run_ns{0};  // when a window last let a stretch run natively
  // Collector only.
  uint64_t last_tick = 0;
  uint64_t ticks = 0;
  uint32_t lock_periods = 0;  // native accounting periods opened (g_lock_period)
  uint64_t first_ns = 0;  // when the first epoch opens (set at the first tick)
  uint64_t last_mask_check = 0;  // when tick last looked for threads that refuse int3
  double charged = 0;     // what the open epoch was charged (refunded if nobody joined)
  double budget_ns = 0;
  uint64_t rng = 0;
};
State g_state;

constexpr uint32_t kSketchBits = 16384;
constexpr uint64_t kHoldNs = 1'000'000'000;
constexpr uint64_t kRunLostNs = 50'000'000;
constexpr uint64_t kRunIdleNs = 10'000'000;
constexpr uint64_t kMaskCheckNs = 20'000'000;

// stepping: one more / one fewer window of epoch e being stepped (lock-free: signal handlers).
void stepping_add(uint32_t e, int d) {
  std::atomic<uint64_t>& a = g_state.stepping;
  uint64_t cur = a.load(std::memory_order_relaxed), next;
  do {
    const bool same = uint32_t(cur >> 32) == e;
    const uint32_t n = same ? uint32_t(cur) : 0;
    if (d < 0 && (!same || n == 0)) return;  // a window of an epoch no longer counted
    if (!same && int32_t(e - uint32_t(cur >> 32)) < 0) return;  // a newer epoch opened meanwhile
    next = uint64_t(e) << 32 | uint32_t(n + d);
  } while (!a.compare_exchange_weak(cur, next, std::memory_order_acq_rel, std::memory_order_relaxed));
}

bool stepping_in(uint32_t e) {
  const uint64_t cur = g_state.stepping.load(std::memory_order_acquire);
  return uint32_t(cur >> 32) == e && uint32_t(cur) != 0;
}

struct Thread {
  uint64_t sketch[kSketchBits / 64];  // lines touched in the window (linear counting)
  uint32_t ones;    // bits set in sketch
  uint32_t ones_before;  // ... when the current stretch of steps began
  uint32_t window;  // index + 1 of the window being stepped; 0: none
  uint32_t left;    // steps still to take
  uint32_t last_epoch;
  uint32_t chunk;   // index + 1 of the chunk being filled (the window's); 0: none
  uint32_t used;
  uint32_t chunk_seq;  // chunks the window claimed so far
  uint64_t fs, gs;
  // After a stepped-over `syscall`, the instruction it returns to: the kernel returns with
  // IRET and the trap comes only after that instruction ran, so it is decoded after the fact.
  uint64_t after_syscall;
  // A system call was stepped over since the last recorded access (kTraceAfterSyscall).
  bool syscalled;
  // Runs: the thread runs natively towards a breakpoint (TF clear), since last_trap_ns, through
  // the stretch [run_lo, run_end) it recorded; the breakpoint it expects is at run_end.
  bool running;
  uint64_t last_trap_ns;
  uint64_t run_lo, run_end;
};
__thread Thread t_tr __attribute__((tls_model("initial-exec")));
// Inside on_sigtrap's window path: a breakpoint met meanwhile (only possible where the handler's
// own code was patched, i.e. in tests that link the runtime into the program) is only taken.
__thread bool t_in_handler __attribute__((tls_model("initial-exec")));
}  // namespace
__thread LockMarks t_lock_marks __attribute__((tls_model("initial-exec")));
std::atomic<uint32_t> g_lock_period{0};
namespace {

// Mutex hand-over accounting (lock_releasing). Per-thread counters in slots of their own (a
// thread takes a slot at its first release of a mutex; threads past kLockSlots share the last one,
// with locked adds), and the last holder of each mutex in a direct-mapped table.
struct alignas(64) LockSlot {
  std::atomic<uint64_t> counts[4];  // native acquisitions, native hand-overs, traced ..., traced ...
  std::atomic<uint64_t> untracked;
};
constexpr uint32_t kLockSlots = 256;
constexpr uint32_t kHolderSlots = 4096;
struct Holder {
  std::atomic<uintptr_t> mutex;
  std::atomic<uint64_t> thread;  // its last releaser: tag << 48 | thread (lock_releasing)
};
LockSlot g_lock_slots[kLockSlots];
Holder g_holders[kHolderSlots];
std::atomic<uint32_t> g_lock_next{0};
__thread uint32_t t_lock_slot __attribute__((tls_model("initial-exec")));  // index + 1

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool in_child() { return g_state.pid != 0 && pid_t(syscall(SYS_getpid)) != g_state.pid; }

// A free chunk of the pool (the lowest: its pages are the ones already resident), or kNoChunk.
// Lock-free: called from signal handlers of any thread.
uint32_t claim_chunk() {
  State& s = g_state;
  if (s.room.fetch_sub(kChunk, std::memory_order_relaxed) < int64_t(kChunk)) {
    s.room.fetch_add(kChunk, std::memory_order_relaxed);
    return kNoChunk;
  }
  for (uint32_t i = 0; i < (s.nchunks + 63) / 64; ++i) {
    uint64_t w = s.busy[i].load(std::memory_order_relaxed);
    while (~w) {
      const uint32_t b = uint32_t(__builtin_ctzll(~w));
      if (i * 64 + b >= s.nchunks) break;
      if (s.busy[i].compare_exchange_weak(w, w | uint64_t(1) << b, std::memory_order_acquire,
                                          std::memory_order_relaxed))
        return i * 64 + b;
    }
  }
  s.room.fetch_add(kChunk, std::memory_order_relaxed);
  return kNoChunk;
}

// The window's chunk is done (the window ends): what it did not use goes back to the room.
void release_chunk() {
  if (t_tr.chunk) g_state.room.fetch_add(int64_t(kChunk - t_tr.used), std::memory_order_relaxed);
  t_tr.chunk = 0;
  t_tr.used = 0;
}

bool append(const profile::TraceAccessRecord& r, uint64_t at_ns) {
  State& s = g_state;
  if (t_tr.chunk == 0 || t_tr.used == kChunk) {
    const uint32_t c = claim_chunk();
    if (c == kNoChunk) return false;
    s.owner[c] = {r.window, t_tr.chunk_seq++};
    s.chunk_used[c].store(0, std::memory_order_release);  // publishes owner (kFree until then)
    t_tr.chunk = c + 1;
    t_tr.used = 0;
  }
  s.recs[size_t(t_tr.chunk - 1) * kChunk + t_tr.used] = r;
  s.times[size_t(t_tr.chunk - 1) * kChunk + t_tr.used] = at_ns;
  ++t_tr.used;
  s.chunk_used[t_tr.chunk - 1].store(t_tr.used, std::memory_order_release);
  return true;
}

void end_window(Window& w, profile::TraceEnd why, ucontext_t* uc) {
  uc->uc_mcontext.gregs[REG_EFL] &= ~kTrapFlag;
  const uint64_t end = now_ns();
  w.end.store(uint32_t(why), std::memory_order_relaxed);
  w.end_ns.store(end, std::memory_order_release);
  stepping_add(w.epoch, -1);
  const uint32_t steps = w.steps.load(std::memory_order_relaxed);
  const uint64_t cpu = thread_cpu_ns();
  if (steps >= 1000 && cpu > w.start_cpu_ns) {
    // What a step and a window cost as this window measured them, in the thread's CPU time (a
    // system call that blocked while stepped over costs the program nothing of ours), averaged
    // with the previous measures (threads ending at once may lose an update: harmless). The
    // first measure replaces the configured guess, which runs can beat five- to tenfold.
    const uint64_t spent = cpu - w.start_cpu_ns;
    const bool first = !g_state.cost_measured.exchange(true, std::memory_order_relaxed);
    const uint64_t old = first ? spent / steps : g_state.step_cost_ns.load(std::memory_order_relaxed);
    g_state.step_cost_ns.store((old * 3 + spent / steps) / 4, std::memory_order_relaxed);
    const uint64_t wold = first ? spent : g_state.window_cost_ns.load(std::memory_order_relaxed);
    g_state.window_cost_ns.store((wold * 3 + spent) / 4, std::memory_order_relaxed);
  }
  release_chunk();
  t_tr.window = 0;
  t_lock_marks.stepping = 0;
  t_tr.left = 0;
  t_tr.after_syscall = 0;
  t_tr.running = false;
}

// Whether the system call the thread is about to make can be stepped over: the kernel enters
// with TF masked and sysret restores it, so the step resumes after it (a blocking call simply
// lasts). Not: calls that create a thread or process (the child would inherit TF and trap with
// every signal blocked, which kills it), exec, exit, signal dispositions (the program could take
// SIGTRAP over) and masks (it could block SIGTRAP: the next step would kill the thread), ptrace.
bool steppable_syscall(const ucontext_t* uc) {
  const greg_t nr = uc->uc_mcontext.gregs[REG_RAX];
  switch (nr) {
    case SYS_rt_sigaction: case SYS_clone: case SYS_fork: case SYS_vfork: case SYS_execve:
    case SYS_exit: case SYS_ptrace: case SYS_exit_group: case SYS_execveat: case SYS_clone3:
    case SYS_rt_sigreturn: case SYS_seccomp:
      return false;
    case SYS_rt_sigprocmask:
      return uc->uc_mcontext.gregs[REG_RSI] == 0;  // only reads the mask
    case SYS_prctl:
      return uc->uc_mcontext.gregs[REG_RDI] != PR_SET_SECCOMP;  // strict mode forbids sigreturn
    default:
      return true;
  }
}

profile::TraceEnd append_operands(const MemAccess& m, uint64_t rip, Window& w);

// The instruction's bytes as the program has them (a breakpoint of ours replaced by the original
// byte), at most 15 and never past its code segment; 0 outside every module (JIT code?).
size_t code_at(uint64_t ip, uint8_t* buf) {
  const detail::ModuleTable* t = detail::current_modules();
  const detail::CodeSegment* seg = t ? detail::find_segment(*t, ip) : nullptr;
  if (!seg) return 0;
  const size_t n = seg->hi - ip < 15 ? size_t(seg->hi - ip) : 15;
  const auto* p = reinterpret_cast<const uint8_t*>(ip);
  for (size_t i = 0; i < n; ++i) buf[i] = p[i];
  if (n && buf[0] == 0xCC) patches::original_byte(ip, &buf[0]);
  return n;
}

// One instruction recorded, and maybe the end of the window: counts it, and when the window's
// steps run out goes on or ends it (see Config::target_lines). False when the window ended.
bool spend(Window& w, ucontext_t* uc) {
  State& s = g_state;
  w.steps.fetch_add(1, std::memory_order_relaxed);
  if (--t_tr.left != 0) return true;
  // Not yet past the L1 in distinct lines, and still finding new ones (at least 1/64 of the
  // target in the last stretch: a loop whose footprint stopped growing gains nothing by going
  // on): a quarter more, up to max_steps.
  const uint32_t steps = w.steps.load(std::memory_order_relaxed);
  const bool growing = t_tr.ones - t_tr.ones_before >= s.sketch_target / 64 + 1;
  if (s.sketch_target && t_tr.ones < s.sketch_target && growing && steps < s.cfg.max_steps) {
    const uint32_t more = s.cfg.steps / 4 ? s.cfg.steps / 4 : 1;
    t_tr.left = s.cfg.max_steps - steps < more ? s.cfg.max_steps - steps : more;
    t_tr.ones_before = t_tr.ones;
    return true;
  }
  end_window(w, profile::TraceEnd::Done, uc);
  return false;
}

// Single-steps the decoded instruction at ip (about to run): records it and sets TF, as every
// step did before runs. Returns the reason the window must end before it, or Done.
profile::TraceEnd step_one(ucontext_t* uc, Window& w, uint64_t ip, DecodeStatus st, const MemAccess& m) {
  if (m.step_stop == kStepSyscall) {
    if (!steppable_syscall(uc)) return profile::TraceEnd::Syscall;
    t_tr.after_syscall = ip + m.length;
    t_tr.syscalled = true;
  }
  if (m.step_stop == kStepFlags) return profile::TraceEnd::Flags;
  if (m.step_stop == kStepKernel) return profile::TraceEnd::Syscall;
  if (st == DecodeStatus::BadBytes) return profile::TraceEnd::Undecodable;
  if (st == DecodeStatus::Ok) {
    const profile::TraceEnd why = append_operands(m, ip, w);
    if (why != profile::TraceEnd::Done) return why;
  }
  g_state.single_steps.fetch_add(1, std::memory_order_relaxed);
  // A plain breakpoint on ip: its copy runs (stepped: the trap comes at its jump back) whether
  // or not the window goes on.
  uc->uc_mcontext.gregs[REG_RIP] = greg_t(patches::resume_at(ip));
  if (spend(w, uc)) {
    uc->uc_mcontext.gregs[REG_EFL] |= kTrapFlag;
    t_tr.running = false;
  }
  return profile::TraceEnd::Done;
}

// The thread, in a window, is about to run the instruction at rip. Records what it runs next
// and arranges the next trap (see trace.h, "Runs"): control transfers the handler can take are
// taken here; straight-line code up to the next one runs natively once its accesses are
// recorded, with a breakpoint on that transfer; anything else is single-stepped. Returns the
// reason the window must end before rip, or Done (the window may have ended by its steps).
profile::TraceEnd advance(ucontext_t* uc, Window& w) {
  constexpr uint32_t kMaxRun = 48;  // instructions recorded ahead of one breakpoint
  State& s = g_state;
  const bool runs = s.runs_now.load(std::memory_order_relaxed);
  const RegisterView rv{uc, t_tr.fs, t_tr.gs};
  uint8_t code[15];
  for (;;) {
    const uint64_t ip = uint64_t(uc->uc_mcontext.gregs[REG_RIP]);
    const size_t n = code_at(ip, code);
    if (!n) return profile::TraceEnd::Undecodable;
    MemAccess m;
    RunInfo run;
    const DecodeStatus st = decode_step(code, n, ip, rv, &m, &run);
    const bool transfer = run.role == kRunBranch ||
                          ((run.role == kRunCall || run.role == kRunRet) && patches::calls_allowed());
    if (transfer && s.cfg.runs) {  // taken here whether or not this epoch arms breakpoints
      // A call's return slot and a ret's are stack slots: counted as skipped, as when stepped.
      if (st == DecodeStatus::Ok) {
        const profile::TraceEnd why = append_operands(m, ip, w);
        if (why != profile::TraceEnd::Done) return why;
      }
      patches::take(ip, m.length, run, uc);
      if (!spend(w, uc)) return profile::TraceEnd::Done;
      continue;
    }
    if (!runs || run.role != kRunPlain || st == DecodeStatus::BadBytes) return step_one(uc, w, ip, st, m);
    // Straight-line code from ip: every instruction whose addresses use no register an earlier
    // one of the stretch writes is recorded now, from the registers as they are; the stretch
    // must end at a control transfer that can carry a breakpoint, else ip is single-stepped.
    // Before any insert: a tick that sees breakpoints must not take them for idle ones.
    s.last_run_ns.store(now_ns(), std::memory_order_relaxed);
    MemAccess ahead[kMaxRun];
    uint64_t at[kMaxRun];
    ahead[0] = m;
    at[0] = ip;
    uint32_t k = 1, written = run.written_regs;
    uint64_t j = ip + m.length;
    bool armed = false;
    while (k < kMaxRun) {
      // A breakpoint already there (a stretch that started earlier in the block put it) ends
      // this one too: what follows it is recorded at its trap, not twice.
      if (patches::live_at(j)) {
        armed = true;
        break;
      }
      uint8_t c2[15];
      const size_t n2 = code_at(j, c2);
      if (!n2) break;
      MemAccess m2;
      RunInfo r2;
      if (decode_step(c2, n2, j, rv, &m2, &r2) == DecodeStatus::BadBytes) break;
      if (r2.role == kRunBranch || r2.role == kRunCall || r2.role == kRunRet) {
        armed = patches::insert(j, c2, m2.length, r2);
        break;
      }
      if (r2.role != kRunPlain) break;
      if (r2.address_regs & written) {  // its address is known only once the stretch ran
        armed = patches::insert(j, c2, m2.length, r2);
        break;
      }
      ahead[k] = m2;
      at[k] = j;
      ++k;
      written |= r2.written_regs;
      j += m2.length;
      if (k == kMaxRun) {  // long enough: j starts the next stretch
        const size_t n3 = code_at(j, c2);
        armed = n3 && decode_step(c2, n3, j, rv, &m2, &r2) != DecodeStatus::BadBytes &&
                patches::insert(j, c2, m2.length, r2);
      }
    }
    if (!armed) return step_one(uc, w, ip, st, m);
    s.run_traps.fetch_add(1, std::memory_order_relaxed);
    s.run_steps.fetch_add(k, std::memory_order_relaxed);
    for (uint32_t i = 0; i < k; ++i) {
      if (ahead[i].count) {
        const profile::TraceEnd why = append_operands(ahead[i], at[i], w);
        if (why != profile::TraceEnd::Done) return why;
      }
      if (!spend(w, uc)) return profile::TraceEnd::Done;  // the rest runs unrecorded
    }
    uc->uc_mcontext.gregs[REG_EFL] &= ~kTrapFlag;
    uc->uc_mcontext.gregs[REG_RIP] = greg_t(patches::resume_at(ip));
    t_tr.running = true;
    t_tr.run_lo = ip;
    t_tr.run_end = j;
    t_tr.last_trap_ns = now_ns();
    s.last_run_ns.store(t_tr.last_trap_ns, std::memory_order_relaxed);
    return profile::TraceEnd::Done;
  }
}

// The instruction a stepped-over system call returned to ran before this trap (see
// Thread::after_syscall): its accesses from the registers after it, when they can be told.
profile::TraceEnd record_after_syscall(ucontext_t* uc, Window& w) {
  const uint64_t ip = t_tr.after_syscall;
  t_tr.after_syscall = 0;
  if (uint64_t(uc->uc_mcontext.gregs[REG_RIP]) == ip) return profile::TraceEnd::Done;  // not run yet
  RegisterView rv{uc, t_tr.fs, t_tr.gs};
  MemAccess m;
  uint8_t code[15];
  const size_t avail = code_at(ip, code);
  if (!avail) return profile::TraceEnd::Done;
  if (decode_after_bytes(code, avail, ip, rv, &m) != DecodeStatus::Ok) {
    if (m.count) w.skipped.fetch_add(m.count, std::memory_order_relaxed);  // clobbered
    return profile::TraceEnd::Done;
  }
  return append_operands(m, ip, w);
}

profile::TraceEnd append_operands(const MemAccess& m, uint64_t rip, Window& w) {
  State& s = g_state;
  const bool own = rip >= s.own_lo && rip < s.own_hi;
  uint64_t at = 0;  // read once per step, only when the step records an access
  for (uint8_t i = 0; i < m.count; ++i) {
    const MemOperand& op = m.ops[i];
    if (own || op.stack) {
      w.skipped.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (s.sketch_target) {
      uint64_t h = (op.addr >> s.cfg.line_shift) * 0x9e3779b97f4a7c15ull;
      h >>= 64 - 14;  // 16 Ki bits
      uint64_t& word = t_tr.sketch[h / 64];
      const uint64_t bit = uint64_t(1) << (h % 64);
      if (!(word & bit)) word |= bit, ++t_tr.ones;
    }
    profile::TraceAccessRecord r{};
    r.ip = rip;
    r.addr = op.addr;
    r.object = s.lookup ? s.lookup(op.addr) : 0;
    r.window = t_tr.window - 1;
    r.size = op.size;
    r.flags = op.flags;
    r.marks = t_tr.syscalled ? profile::kTraceAfterSyscall : 0;
    if (t_lock_marks.in_call) r.marks |= profile::kTraceInLockCall;
    if (t_lock_marks.held) r.marks |= profile::kTraceLockHeld;
    t_tr.syscalled = false;
    if (!at) at = now_ns();
    if (!append(r, at)) {
      w.dropped.fetch_add(1, std::memory_order_relaxed);
      s.dropped.fetch_add(1, std::memory_order_relaxed);
      return profile::TraceEnd::Full;
    }
  }
  return profile::TraceEnd::Done;
}

void not_ours(siginfo_t* si, ucontext_t* uc) {
  if (g_state.cfg.forward) g_state.cfg.forward(SIGTRAP, si, uc);
  else sigtrap_default_action(si, uc);
}

// Steps of the window the thread is in, from a trap at an instruction not yet run.
void window_trap(ucontext_t* uc, bool after_step) {
  State& s = g_state;
  Window& w = s.windows[t_tr.window - 1];
  if (s.stopped.load(std::memory_order_relaxed)) {
    end_window(w, profile::TraceEnd::Stopped, uc);
    return;
  }
  t_in_handler = true;
  // A single step of an out-of-line copy ends at its jump back: the program is after the original.
  if (uint64_t next = 0; after_step && patches::after_copy(uint64_t(uc->uc_mcontext.gregs[REG_RIP]), &next))
    uc->uc_mcontext.gregs[REG_RIP] = greg_t(next);
  profile::TraceEnd why = profile::TraceEnd::Done;
  if (t_tr.after_syscall) {
    if (after_step) why = record_after_syscall(uc, w);
    else t_tr.after_syscall = 0;  // a breakpoint on the instruction after it: not run yet
  }
  if (why == profile::TraceEnd::Done) why = advance(uc, w);
  if (why != profile::TraceEnd::Done && t_tr.window) end_window(w, why, uc);
  t_in_handler = false;
}

// An int3 at rip - 1 that is a breakpoint of ours (true), or not (false: someone else's).
bool on_breakpoint(ucontext_t* uc) {
  const uint64_t ip = uint64_t(uc->uc_mcontext.gregs[REG_RIP]) - 1;
  const patches::Entry* e = patches::find(ip);
  if (!e) return false;
  uc->uc_mcontext.gregs[REG_RIP] = greg_t(ip);  // the instruction there has not run
  if (__atomic_load_n(reinterpret_cast<const uint8_t*>(ip), __ATOMIC_ACQUIRE) != 0xCC) {
    patches::count_stray();  // removed since the trap: the original instruction runs now
    return true;
  }
  if (t_tr.window && !t_in_handler && t_tr.running && ip != t_tr.run_end) {
    if (ip >= t_tr.run_lo && ip < t_tr.run_end) {
      // Another thread's breakpoint inside the stretch this one recorded: taken, not recorded
      // again; the stretch goes on to its end.
      patches::take(*e, uc);
      return true;
    }
    // Anywhere else: the thread left its stretch (a handler of the program, a siglongjmp, a
    // breakpoint removed under it): what it ran meanwhile is unknown, so the window ends.
    end_window(g_state.windows[t_tr.window - 1], profile::TraceEnd::Lost, uc);
  }
  if (t_in_handler || !t_tr.window) {
    // A running thread that has not joined the open epoch joins here (Config::identify); its
    // first advance() takes the instruction, which moves rip.
    const State& s = g_state;
    const uint32_t epoch = s.epoch.load(std::memory_order_acquire);
    uint32_t index = 0;
    uint64_t fs = 0, gs = 0;
    if (!t_in_handler && s.cfg.identify && epoch != 0 && epoch != t_tr.last_epoch &&
        s.cfg.identify(&index, &fs, &gs)) {
      start_here(uc, index, fs, gs);
      if (uint64_t(uc->uc_mcontext.gregs[REG_RIP]) != ip) return true;
    }
    patches::take(*e, uc);
    return true;
  }
  window_trap(uc, /*after_step=*/false);
  return true;
}

void on_sigtrap(int, siginfo_t* si, void* ctx) {
  const int saved_errno = errno;
  auto* uc = static_cast<ucontext_t*>(ctx);
  State& s = g_state;
  if (si->si_code == SI_KERNEL && on_breakpoint(uc)) {
    errno = saved_errno;
    return;
  }
  if (si->si_code != TRAP_TRACE || t_in_handler) {
    not_ours(si, uc);
    errno = saved_errno;
    return;
  }
  if (!t_tr.window) {
    if (s.cfg.program_owns && s.cfg.program_owns()) {
      not_ours(si, uc);  // the program steps itself: its handler decides
    } else {
      // TF outside a window can only be ours: a popf that restored a TF pushed during a window,
      // or a window ended while a program's handler ran. (No getpid() per step: a forked child's
      // thread is never in a window, since fork and clone end it first.)
      uc->uc_mcontext.gregs[REG_EFL] &= ~kTrapFlag;
      s.stray.fetch_add(1, std::memory_order_relaxed);
    }
    errno = saved_errno;
    return;
  }
  window_trap(uc, /*after_step=*/true);
  errno = saved_errno;
}

// A chunk's fill count if a window claimed and published it and it is not spilled, else kFree.
uint32_t fill_of(uint32_t c) {
  const State& s = g_state;
  if (!(s.busy[c / 64].load(std::memory_order_acquire) >> (c % 64) & 1)) return kFree;
  return s.chunk_used[c].load(std::memory_order_acquire);
}

// The spill file's descriptor is no longer that file: nothing goes there or comes back from it
// again (what went there is lost; a note says so).
void lose_spill_file() {
  g_state.spill_errno.store(EBADF, std::memory_order_relaxed);
  g_state.spill_fd = g_state.spill_fd_read = -1;
}

// Whether fd is still the spill file (the program may have closed it and opened another file
// under the same number: that one is never written or read). The inode number alone does not
// tell: the one a closed unnamed file freed is the next one a file system like ext4 hands out,
// and the descriptor number too. So also: no name (an O_TMPFILE opened with O_EXCL never gets
// one; a file the program created has one), and exactly the bytes written (`exact`: before a
// write) or at least them (after a failed write).
bool still_ours(int fd, bool exact) {
  struct stat st{};
  if (fd < 0 || fstat(fd, &st) != 0) return false;
  const State& s = g_state;
  return uint64_t(st.st_dev) == s.spill_dev && uint64_t(st.st_ino) == s.spill_ino && st.st_nlink == 0 &&
         (exact ? uint64_t(st.st_size) == s.spill_end : uint64_t(st.st_size) >= s.spill_end);
}

// The snapshot every export uses (so that windows' access counts and the accesses agree, and
// a section written twice gives the same bytes): every chunk of accesses, spilled or in memory,
// as a piece, sorted by window and by chunk within it (program order), and the accesses per
// window into s.per_window. The pool is read before the spilled list: a chunk spilled meanwhile
// (only if the collector outlived finish()'s wait) then appears both ways, and one copy is kept,
// never neither. At most max_windows windows. Returns the number of windows exported.
uint32_t take_snapshot(uint32_t max_windows = ~0u) {
  State& s = g_state;
  uint32_t nw = s.nwindows.load(std::memory_order_acquire);
  if (nw > s.cfg.max_windows) nw = s.cfg.max_windows;
  if (nw > max_windows) nw = max_windows;
  if (!s.per_window) return 0;
  uint32_t n = 0;
  for (uint32_t c = 0; c < s.nchunks; ++c) {
    const uint32_t used = fill_of(c);
    if (used == kFree || used == 0) continue;
    const ChunkOwner o = s.owner[c];
    if (o.window < nw) s.pieces[n++] = {o.window, o.seq, used, c, 0};
  }
  if (s.spill_fd_read >= 0 && !still_ours(s.spill_fd_read, /*exact=*/false)) lose_spill_file();
  const uint32_t ns = s.spill_fd_read >= 0 ? s.nspilled.load(std::memory_order_acquire) : 0;
  for (uint32_t i = 0; i < ns; ++i) {
    const Spilled& f = s.spilled[i];
    if (f.window < nw && f.count) s.pieces[n++] = {f.window, f.seq, f.count, kNoChunk, f.offset};
  }
  std::sort(s.pieces, s.pieces + n, [](const Piece& a, const Piece& b) {
    return a.window != b.window ? a.window < b.window : a.seq < b.seq;
  });
  uint32_t kept = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (!kept || s.pieces[kept - 1].window != s.pieces[i].window || s.pieces[kept - 1].seq != s.pieces[i].seq)
      s.pieces[kept++] = s.pieces[i];
  s.npieces = kept;
  memset(s.per_window, 0, sizeof(uint32_t) * nw);
  s.snapshot_accesses = 0;
  for (uint32_t i = 0; i < kept; ++i) {
    s.per_window[s.pieces[i].window] += s.pieces[i].count;
    s.snapshot_accesses += s.pieces[i].count;
  }
  s.snapshot = true;
  return nw;
}

// A piece's records (times: false) or times (true): in the pool, or read back into s.io.
// Null when the spill file cannot be read.
const void* piece_data(const Piece& p, bool times) {
  State& s = g_state;
  if (p.chunk != kNoChunk)
    return times ? static_cast<const void*>(s.times + size_t(p.chunk) * kChunk)
                 : static_cast<const void*>(s.recs + size_t(p.chunk) * kChunk);
  const size_t rec_bytes = sizeof(profile::TraceAccessRecord) * p.count;
  const size_t bytes = times ? sizeof(uint64_t) * p.count : rec_bytes;
  const uint64_t at = p.offset + (times ? rec_bytes : 0);
  for (size_t done = 0; done < bytes;) {
    const ssize_t r = pread(s.spill_fd_read, s.io + done, bytes - done, off_t(at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO;
      return nullptr;
    }
    done += size_t(r);
  }
  return s.io;
}

bool write_at(int fd, const void* data, size_t n, uint64_t at) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n) {
    const ssize_t w = pwrite(fd, p, n, off_t(at));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    at += uint64_t(w);
    n -= size_t(w);
  }
  return true;
}

// The collector: every finished chunk (full, or its window ended) goes to the spill file and
// back to the pool. A failed write stops spilling (what is in memory stays there). At most
// kSpillPerTick chunks a tick: the tick holds the lock a fork() of the program waits for.
constexpr uint32_t kSpillPerTick = 64;  // 5 MiB

void spill() {
  State& s = g_state;
  uint32_t budget = kSpillPerTick;
  for (uint32_t c = 0; c < s.nchunks && s.spill_fd >= 0 && budget; ++c) {
    uint32_t used = fill_of(c);
    if (used == kFree) continue;  // free, or claimed and not yet published
    const ChunkOwner o = s.owner[c];
    if (used != kChunk) {
      if (o.window >= s.cfg.max_windows || s.windows[o.window].end_ns.load(std::memory_order_acquire) == 0)
        continue;  // still being filled
      used = s.chunk_used[c].load(std::memory_order_acquire);  // final now
    }
    if (s.nspilled.load(std::memory_order_relaxed) >= s.max_spilled) return;
    if (!still_ours(s.spill_fd, /*exact=*/true)) {  // before every write: the program may close it
      lose_spill_file();
      return;
    }
    --budget;
    const size_t rec_bytes = sizeof(profile::TraceAccessRecord) * used;
    const size_t time_bytes = sizeof(uint64_t) * used;
    const uint64_t at = s.spill_end;
    if (!write_at(s.spill_fd, s.recs + size_t(c) * kChunk, rec_bytes, at) ||
        !write_at(s.spill_fd, s.times + size_t(c) * kChunk, time_bytes, at + rec_bytes)) {
      s.spill_errno.store(uint64_t(errno ? errno : EIO), std::memory_order_relaxed);
      s.spill_fd = -1;
      return;
    }
    s.spill_end = at + rec_bytes + time_bytes;
    const uint32_t k = s.nspilled.load(std::memory_order_relaxed);
    s.spilled[k] = {o.window, o.seq, used, 0, at};
    s.nspilled.store(k + 1, std::memory_order_release);
    s.spilled_accesses.fetch_add(used, std::memory_order_relaxed);
    s.chunk_used[c].store(kFree, std::memory_order_relaxed);
    s.busy[c / 64].fetch_and(~(uint64_t(1) << (c % 64)), std::memory_order_release);
  }
}

}  // namespace

int init(const Config& c, ObjectLookup lookup, uint64_t own_lo, uint64_t own_hi) {
  State& s = g_state;
  if (c.steps == 0 || c.max_windows == 0 || c.first_max_ns < c.first_min_ns || c.line_shift > 12 || c.max_accesses < kChunk || c.budget_permille == 0 || c.lock_period_ticks == 0 ||
      c.budget_permille > 1000)
    return EINVAL;
  struct sigaction old;
  if (sigaction(SIGTRAP, nullptr, &old) != 0) return errno;
  const bool ours = (old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_sigtrap;
  if (!ours && ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)) return EBUSY;
  if (s.base) {  // re-init (tests): only when no window can be running
    munmap(s.base, s.mapped);
    s.base = nullptr;
  }
  s.cfg = c;
  s.lookup = lookup;
  s.own_lo = own_lo;
  s.own_hi = own_hi;
  s.pid = getpid();
  // The pool: the accesses the store may hold, and as much again for the unused ends of
  // windows' last chunks when nothing is spilled (a window claims chunks of its own: a
  // thousand windows of a few accesses each still fit). Address space only: a chunk's pages
  // are touched as it fills, and a spill file keeps the resident part to the chunks being
  // filled.
  const uint32_t cap_chunks = c.max_accesses / kChunk;
  s.nchunks = 2 * cap_chunks;
  // Chunks spilled: at most the full ones the room allows and one partly filled per window.
  s.max_spilled = cap_chunks + c.max_windows;
  const size_t max_pieces = size_t(s.max_spilled) + s.nchunks;  // spilled + in memory
  size_t at = 0;
  auto place = [&at](size_t bytes) {
    const size_t here = at;
    at = (at + bytes + 63) & ~size_t(63);
    return here;
  };
  const size_t o_windows = place(sizeof(Window) * c.max_windows);
  const size_t o_used = place(sizeof(std::atomic<uint32_t>) * s.nchunks);
  const size_t o_owner = place(sizeof(ChunkOwner) * s.nchunks);
  const size_t o_busy = place(sizeof(std::atomic<uint64_t>) * ((s.nchunks + 63) / 64));
  const size_t o_spilled = place(sizeof(Spilled) * s.max_spilled);
  const size_t o_pieces = place(sizeof(Piece) * max_pieces);
  const size_t o_per_window = place(sizeof(uint32_t) * c.max_windows);
  const size_t o_io = place(sizeof(profile::TraceAccessRecord) * kChunk);
  const size_t o_recs = place(sizeof(profile::TraceAccessRecord) * size_t(s.nchunks) * kChunk);
  const size_t o_times = place(sizeof(uint64_t) * size_t(s.nchunks) * kChunk);
  s.mapped = at;
  void* m = mmap(nullptr, s.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return errno;
  s.base = m;
  auto* p = static_cast<uint8_t*>(m);
  s.windows = new (p + o_windows) Window[c.max_windows];
  s.chunk_used = new (p + o_used) std::atomic<uint32_t>[s.nchunks];
  for (uint32_t i = 0; i < s.nchunks; ++i) s.chunk_used[i].store(kFree, std::memory_order_relaxed);
  s.owner = reinterpret_cast<ChunkOwner*>(p + o_owner);
  s.busy = new (p + o_busy) std::atomic<uint64_t>[(s.nchunks + 63) / 64];
  s.spilled = reinterpret_cast<Spilled*>(p + o_spilled);
  s.pieces = reinterpret_cast<Piece*>(p + o_pieces);
  s.per_window = reinterpret_cast<uint32_t*>(p + o_per_window);
  s.io = p + o_io;
  s.recs = reinterpret_cast<profile::TraceAccessRecord*>(p + o_recs);
  s.times = reinterpret_cast<uint64_t*>(p + o_times);
  s.room.store(int64_t(cap_chunks) * kChunk);
  s.spill_fd = s.spill_fd_read = -1;
  struct stat st{};
  if (c.spill_fd >= 0 && fstat(c.spill_fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 0 &&
      st.st_size == 0) {
    s.spill_fd = s.spill_fd_read = c.spill_fd;
    s.spill_dev = uint64_t(st.st_dev);
    s.spill_ino = uint64_t(st.st_ino);
  }
  s.nspilled.store(0);
  s.spill_end = 0;
  s.spilled_accesses.store(0);
  s.spill_errno.store(0);
  s.npieces = 0;
  s.nwindows.store(0);
  s.epoch.store(0);
  s.epoch_end.store(0);
  s.stepping.store(0);
  s.stopped.store(false);
  s.epochs.store(0);
  s.dropped.store(0);
  s.stray.store(0);
  if (c.runs) {
    if (const int e = patches::init(reinterpret_cast<uint64_t>(&on_sigtrap)); e != 0) return e;
    set_patched_byte(patches::original_byte);
  }
  s.runs_now.store(false);
  s.run_traps.store(0);
  s.run_steps.store(0);
  s.single_steps.store(0);
  s.step_cost_ns.store(c.step_cost_ns);
  s.window_cost_ns.store(uint64_t(c.steps) * c.step_cost_ns);
  s.cost_measured.store(false);
  // Linear counting: n distinct lines set m (1 - e^(-n/m)) of m bits on average.
  s.sketch_target = c.target_lines
                        ? uint32_t(double(kSketchBits) * (1.0 - std::exp(-double(c.target_lines) / kSketchBits)))
                        : 0;
  s.last_tick = 0;
  s.first_ns = 0;
  s.charged = 0;
  s.snapshot = false;
  s.joined.store(0);
  s.budget_ns = double(c.steps) * c.step_cost_ns;  // the first window is granted
  s.rng = c.seed ? c.seed : 1;
  t_tr = Thread{};
  if (!ours) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigtrap;
    // SA_NODEFER: a breakpoint met inside the handler (tests that link the runtime into the
    // program, whose code may carry breakpoints) traps again instead of killing the thread, and
    // is taken (t_in_handler).
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
    // Every asynchronous signal waits while a step is recorded (the records are per thread and
    // not re-entrant); synchronous ones cannot be blocked usefully.
    sigfillset(&sa.sa_mask);
    for (int sig : {SIGTRAP, SIGSEGV, SIGBUS, SIGILL, SIGFPE}) sigdelset(&sa.sa_mask, sig);
    if (sigaction(SIGTRAP, &sa, nullptr) != 0) return errno;
  }
  s.installed = true;
  return 0;
}

bool start_here(ucontext_t* uc, uint32_t thread_index, uint64_t fs_base, uint64_t gs_base) {
  State& s = g_state;
  if (!s.installed || t_tr.window || s.stopped.load(std::memory_order_relaxed)) return false;
  const uint32_t e = s.epoch.load(std::memory_order_acquire);
  if (e == 0 || e == t_tr.last_epoch) return false;
  const uint64_t now = now_ns();
  const uint64_t end = s.epoch_end.load(std::memory_order_relaxed);
  if (now > end && (now > end + kHoldNs || !stepping_in(e))) return false;
  // The kernel kills a thread that single-steps with SIGTRAP blocked.
  if (sigismember(&uc->uc_sigmask, SIGTRAP) == 1) return false;
  if (in_child()) return false;
  t_tr.last_epoch = e;
  const uint32_t idx = s.nwindows.fetch_add(1, std::memory_order_relaxed);
  if (idx >= s.cfg.max_windows) return false;
  Window& w = s.windows[idx];
  w.start_ns = now;
  w.start_cpu_ns = thread_cpu_ns();
  w.thread = thread_index;
  w.epoch = e;
  w.steps.store(0, std::memory_order_relaxed);
  w.dropped.store(0, std::memory_order_relaxed);
  w.skipped.store(0, std::memory_order_relaxed);
  w.end.store(uint32_t(profile::TraceEnd::Stopped), std::memory_order_relaxed);
  w.end_ns.store(0, std::memory_order_release);
  s.joined.fetch_add(1, std::memory_order_relaxed);
  stepping_add(e, +1);
  t_tr.window = idx + 1;
  t_tr.chunk = 0;
  t_tr.chunk_seq = 0;
  t_lock_marks.stepping = 1;
  t_tr.left = s.cfg.steps;
  t_tr.running = false;
  t_tr.after_syscall = 0;
  t_tr.syscalled = false;
  if (s.sketch_target) {
    memset(t_tr.sketch, 0, sizeof t_tr.sketch);
    t_tr.ones = t_tr.ones_before = 0;
  }
  t_tr.fs = fs_base;
  t_tr.gs = gs_base;
  t_in_handler = true;
  const profile::TraceEnd why = advance(uc, w);
  t_in_handler = false;
  if (why != profile::TraceEnd::Done && t_tr.window) end_window(w, why, uc);
  return t_tr.window != 0;
}

bool tracing() { return t_tr.window != 0; }

void lock_releasing(const void* mutex) {
  if (!t_lock_slot) {
    const uint32_t i = g_lock_next.fetch_add(1, std::memory_order_relaxed);
    t_lock_slot = (i < kLockSlots ? i : kLockSlots - 1) + 1;
  }
  LockSlot& slot = g_lock_slots[t_lock_slot - 1];
  const bool shared = t_lock_slot == kLockSlots;  // the overflow slot: several threads add to it
  auto bump = [shared](std::atomic<uint64_t>& c) {
    if (shared) c.fetch_add(1, std::memory_order_relaxed);
    else c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  };
  const uintptr_t m = reinterpret_cast<uintptr_t>(mutex);
  // Who released it, and when: the thread's TCB address (pthread_self without the call; user
  // addresses fit in 48 bits) under a 16-bit tag of the window's epoch or the native period.
  // An entry of another tag is stale (from before this period: its holder may have changed
  // unseen since) and counts as a first release.
  uintptr_t self;
  __asm__("mov %%fs:0, %0" : "=r"(self));
  const bool traced = t_tr.window != 0;
  // Native: only in a period (the tick may have closed it since the hook looked) and while no
  // window steps (an epoch may have opened within the period).
  if (!traced && (g_lock_period.load(std::memory_order_relaxed) == 0 ||
                  stepping_in(g_state.epoch.load(std::memory_order_relaxed))))
    return;
  const uint64_t tag = traced ? 0x8000 | (g_state.windows[t_tr.window - 1].epoch & 0x7FFF)
                              : g_lock_period.load(std::memory_order_relaxed) & 0x7FFF;
  if (tag == 0) return;
  const uint64_t me = tag << 48 | (self & ((uint64_t(1) << 48) - 1));
  Holder& h = g_holders[((m >> 3) * 0x9e3779b97f4a7c15ull) >> (64 - 12)];
  static_assert(kHolderSlots == 4096);
  const uint64_t last = h.thread.load(std::memory_order_relaxed);
  if (h.mutex.load(std::memory_order_relaxed) != m || last >> 48 != tag) {  // first release seen
    h.mutex.store(m, std::memory_order_relaxed);
    h.thread.store(me, std::memory_order_relaxed);
    bump(slot.untracked);
    return;
  }
  const bool handover = last != me;
  if (handover) h.thread.store(me, std::memory_order_relaxed);
  const int base = traced ? 2 : 0;
  bump(slot.counts[base]);
  if (handover) bump(slot.counts[base + 1]);
}

bool export_locks(profile::LockInfoRecord* out) {
  *out = {};
  const uint32_t n = std::min(g_lock_next.load(std::memory_order_relaxed), kLockSlots);
  for (uint32_t i = 0; i < n; ++i) {
    const LockSlot& s = g_lock_slots[i];
    out->native_acquisitions += s.counts[0].load(std::memory_order_relaxed);
    out->native_handovers += s.counts[1].load(std::memory_order_relaxed);
    out->traced_acquisitions += s.counts[2].load(std::memory_order_relaxed);
    out->traced_handovers += s.counts[3].load(std::memory_order_relaxed);
    out->untracked += s.untracked.load(std::memory_order_relaxed);
  }
  return n != 0;
}

void check_lost(ucontext_t* uc) {
  if (!t_tr.window) return;
  // A thread running towards a breakpoint traps within microseconds unless it left the code
  // the run was recorded for (a program's handler that left by siglongjmp) or was descheduled.
  const bool lost = t_tr.running ? now_ns() - t_tr.last_trap_ns > kRunLostNs
                                 : !(uc->uc_mcontext.gregs[REG_EFL] & kTrapFlag);
  if (lost) end_window(g_state.windows[t_tr.window - 1], profile::TraceEnd::Lost, uc);
}

void tick(uint64_t now) {
  State& s = g_state;
  if (!s.installed || s.stopped.load(std::memory_order_relaxed)) {
    g_lock_period.store(0, std::memory_order_relaxed);
    return;
  }
  // Something took SIGTRAP over since (a call that bypassed the runtime's interposed
  // sigaction): stepping on would hand it our traps. Asked of the kernel itself, since the
  // interposed sigaction() answers with the program's view.
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    uint64_t mask;
  } cur{};
  if (syscall(SYS_rt_sigaction, SIGTRAP, nullptr, &cur, sizeof cur.mask) != 0 ||
      cur.handler != reinterpret_cast<void*>(on_sigtrap)) {
    s.stopped.store(true);
    g_lock_period.store(0, std::memory_order_relaxed);
    patches::remove_all();
    return;
  }
  const uint64_t dt = s.last_tick && now > s.last_tick ? now - s.last_tick : 0;
  s.last_tick = now;
  // A native accounting period of the mutex hooks: one tick in cfg.lock_period_ticks, numbered, and
  // the second tick (before the first window: a short run still gets a native measure); never
  // while an epoch is open or a window steps (a stepping thread's slow tenures would count as
  // none of the native threads' hand-overs: lock_releasing also checks).
  const bool quiet = now > s.epoch_end.load(std::memory_order_relaxed) &&
                     !stepping_in(s.epoch.load(std::memory_order_relaxed));
  if ((++s.ticks % s.cfg.lock_period_ticks == 0 || s.ticks == 2) && quiet) {
    s.lock_periods = s.lock_periods % 0x7FFF + 1;
    g_lock_period.store(s.lock_periods, std::memory_order_relaxed);
  } else {
    g_lock_period.store(0, std::memory_order_relaxed);
  }
  s.budget_ns += double(dt) * s.cfg.budget_permille / 1000.0;
  const double cost = double(s.window_cost_ns.load(std::memory_order_relaxed));
  const double cap = cost * 2 > 1e9 * s.cfg.budget_permille / 1000.0 ? cost * 2 : 1e9 * s.cfg.budget_permille / 1000.0;
  if (s.budget_ns > cap) s.budget_ns = cap;
  // The breakpoints go when no window runs on them (none steps, or none let a stretch run for
  // two ticks: a window blocked in a system call keeps its epoch open for up to kHoldNs while
  // threads outside windows pay a trap at each breakpoint), and at once when a thread blocks
  // SIGTRAP or runs under seccomp (an int3 could kill it). A window still running natively
  // then misses its next trap and ends at a sample (check_lost).
  spill();
  if (patches::live()) {
    const uint64_t last = s.last_run_ns.load(std::memory_order_relaxed);  // may be after `now`
    bool go = quiet || (now > last && now - last > kRunIdleNs);
    if (!go && now - s.last_mask_check > kMaskCheckNs) {  // (reads every thread's status)
      s.last_mask_check = now;
      if (detail::some_thread_refuses_int3()) {
        s.runs_now.store(false, std::memory_order_relaxed);  // none again in this epoch
        go = true;
      }
    }
    if (go) patches::remove_all();
  }
  const uint64_t end = s.epoch_end.load(std::memory_order_relaxed);
  if (now <= end) return;  // an epoch is open
  if (now <= end + kHoldNs && stepping_in(s.epoch.load(std::memory_order_relaxed))) return;  // still joinable
  if (s.charged > 0) {  // the last epoch is over: nobody joined it, nothing was spent
    if (s.joined.load(std::memory_order_relaxed) == 0) s.budget_ns += s.charged;
    s.charged = 0;
  }
  if (s.budget_ns < cost || dt == 0) return;
  s.rng ^= s.rng << 13, s.rng ^= s.rng >> 7, s.rng ^= s.rng << 17;
  const double u = double(s.rng >> 11) / double(uint64_t(1) << 53);
  if (s.epochs.load(std::memory_order_relaxed) == 0) {
    // The first epoch at a random time in the first_epoch range, so that any run longer than
    // that gets a window. Later ones: Poisson arrivals, with probability dt / mean_gap per tick.
    if (s.first_ns == 0)
      s.first_ns = now + s.cfg.first_min_ns + uint64_t(u * double(s.cfg.first_max_ns - s.cfg.first_min_ns));
    if (now < s.first_ns) return;
  } else if (s.cfg.mean_gap_ns && u >= double(dt) / double(s.cfg.mean_gap_ns)) {
    return;
  }
  // Breakpoints only while no thread blocks SIGTRAP (an int3 would kill it); a thread blocking
  // it later by a raw system call is not seen (libc's calls are: signal_guard.h).
  s.runs_now.store(s.cfg.runs && !detail::some_thread_refuses_int3(), std::memory_order_relaxed);
  s.budget_ns -= cost;
  s.charged = cost;
  s.joined.store(0, std::memory_order_relaxed);
  s.epoch_end.store(now + s.cfg.epoch_ns, std::memory_order_relaxed);
  s.epoch.fetch_add(1, std::memory_order_release);
  s.epochs.fetch_add(1, std::memory_order_relaxed);
}

void stop() {
  g_state.stopped.store(true, std::memory_order_seq_cst);
  g_lock_period.store(0, std::memory_order_relaxed);
  patches::remove_all();
}

void modules_changing() { patches::remove_all(); }

void forget_after_fork() {
  g_state.stopped.store(true);
  g_lock_period.store(0, std::memory_order_relaxed);
  t_tr.window = 0;
  t_tr.chunk = 0;
  t_tr.running = false;
  t_lock_marks.stepping = 0;
  patches::remove_all(/*in_child=*/true);
  // The child never exports (the parent's windows are the profile's): a long-lived child must
  // not keep the unnamed file's blocks allocated. Only if the number is still that file.
  State& s = g_state;
  if (s.spill_fd_read >= 0 && still_ours(s.spill_fd_read, /*exact=*/false)) close(s.spill_fd_read);
  s.spill_fd = s.spill_fd_read = -1;
}

size_t window_count() {
  const uint32_t n = g_state.nwindows.load(std::memory_order_acquire);
  return n > g_state.cfg.max_windows ? g_state.cfg.max_windows : n;
}

size_t access_count() {
  const State& s = g_state;
  size_t n = s.spilled_accesses.load(std::memory_order_acquire);
  for (uint32_t c = 0; c < s.nchunks; ++c)
    if (const uint32_t used = fill_of(c); used != kFree) n += used;
  return n;
}

size_t export_windows(profile::TraceRecord* out, size_t max) {
  State& s = g_state;
  const uint32_t nw = take_snapshot(uint32_t(std::min<size_t>(max, ~0u)));
  size_t n = 0;
  for (uint32_t i = 0; i < nw && n < max; ++i, ++n) {
    const Window& w = s.windows[i];
    profile::TraceRecord& r = out[n];
    r = {};
    r.start_ns = w.start_ns;
    r.end_ns = w.end_ns.load(std::memory_order_acquire);
    r.thread = w.thread;
    r.epoch = w.epoch;
    r.steps = w.steps.load(std::memory_order_relaxed);
    r.accesses = s.per_window[i];
    r.dropped = w.dropped.load(std::memory_order_relaxed);
    r.end = w.end.load(std::memory_order_relaxed);
    r.skipped = w.skipped.load(std::memory_order_relaxed);
  }
  return n;
}

size_t snapshot_accesses() {
  if (!g_state.snapshot) take_snapshot();
  return g_state.snapshot_accesses;
}

namespace {
// Every piece of the snapshot (export_windows's, else a new one), records or times, through put.
bool write_pieces(bool times, profile::PutBytes put, void* ctx) {
  const State& s = g_state;
  if (!s.snapshot) take_snapshot();
  for (uint32_t i = 0; i < s.npieces; ++i) {
    const Piece& p = s.pieces[i];
    const void* d = piece_data(p, times);
    if (!d) return false;
    if (!put(ctx, d, p.count * (times ? sizeof(uint64_t) : sizeof(profile::TraceAccessRecord)))) return false;
  }
  return true;
}
}  // namespace

bool write_accesses(profile::PutBytes put, void* ctx) { return write_pieces(false, put, ctx); }

bool write_times(profile::PutBytes put, void* ctx) { return write_pieces(true, put, ctx); }

size_t export_accesses(profile::TraceAccessRecord* out, uint64_t* times, size_t max) {
  State& s = g_state;
  if (!s.snapshot) take_snapshot();  // else the one export_windows took, so that the two agree
  s.snapshot = false;
  size_t n = 0;
  for (uint32_t i = 0; i < s.npieces && n < max; ++i) {
    const Piece& p = s.pieces[i];
    const size_t k = std::min<size_t>(p.count, max - n);
    const void* d = piece_data(p, false);
    if (!d) break;
    memcpy(out + n, d, k * sizeof *out);
    if (times) {
      if (!(d = piece_data(p, true))) break;
      memcpy(times + n, d, k * sizeof *times);
    }
    n += k;
  }
  return n;
}

Stats stats() {
  const State& s = g_state;
  Stats st;
  st.epochs = s.epochs.load();
  st.windows = window_count();
  st.accesses = access_count();
  st.dropped = s.dropped.load();
  st.stray_traps = s.stray.load();
  st.step_cost_ns = s.step_cost_ns.load();
  st.single_steps = s.single_steps.load();
  st.run_traps = s.run_traps.load();
  st.run_steps = s.run_steps.load();
  const patches::Stats p = patches::stats();
  st.breakpoints_armed = p.armed;
  st.breakpoints_refused = p.refused;
  st.breakpoint_strays = p.strays;
  st.spilled = s.spilled_accesses.load();
  st.spill_errno = s.spill_errno.load();
  return st;
}

}  // namespace whymiss::soft::trace
