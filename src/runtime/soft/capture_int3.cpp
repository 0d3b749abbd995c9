// The Int3 backend of the capture stage: software breakpoints where debug registers do not fire.
//
// A window's instruction gets 0xCC on its first byte (its page made writable for the window,
// PROT_EXEC kept). A thread reaching it takes SIGTRAP (SI_KERNEL, rip = ip + 1); the handler
// records the capture from the saved original bytes (decode_bytes; the registers are the
// instruction's inputs), writes the original byte back, sets rip = ip and TF, and returns: the
// kernel single-steps the original instruction in place (so rip-relative operands, calls and
// returns behave exactly as without us). The following SIGTRAP (TRAP_TRACE) clears TF and, if
// this thread was the last one stepping over the instruction and the window is still open,
// writes 0xCC again. Every decision a handler takes about the code bytes is made between
// `writers` increments (see Patch), so the collector can close a window without a lock:
//
//  - close (int3_unpatch): ctl := (w, Closed) [seq_cst]; wait writers == 0; write the original
//    byte; restore the page. A handler writes only after it saw (w, Armed|Full) *after* its own
//    writers++ [seq_cst]: by the store/load ordering, either the collector sees the handler's
//    writers++ and waits for it, or the handler sees Closed and writes nothing. So after the
//    wait no handler writes to the page again: no stray int3, no write to a read-only page.
//  - two threads at the int3: both restore (the same byte), both step; `stepping` counts them
//    and only the last one out re-inserts. A thread can still meet an int3 re-inserted by a
//    thread that finished just before it arrived (count 1 -> 0, re-insert, while the second
//    thread already restored and is about to step): its step is then an int3 trap at its own ip
//    with TF set: it restores again and retries (a "bounce", counted). Each re-insert causes at
//    most one bounce per stepping thread, so this terminates.
//  - a thread stepping while the window ends: its step completion sees ctl changed and does
//    nothing (the collector restored the byte); a later window of the slot has another index.
//  - cross-modifying code: only the first byte ever changes, with single-byte stores, so a CPU
//    fetching concurrently sees either the original instruction or int3, both valid; one that
//    runs the original instead of trapping is a missed capture, nothing worse (the pattern of
//    the kernel's text_poke_bp and of uprobes).
//  - a trap that arrives after its int3 was removed (taken just before the collector restored
//    the byte): rip-1 is an ip patched lately (patches, ring of recent ips) and holds no 0xCC
//    any more: rip := ip, the original instruction re-executes (counted, not recorded).
//  - a forked child inherits the patched pages: it restores every patched byte (the first trap
//    in the child, or forget_after_fork) and re-executes; it never records.
//  - anything else (a program's own int3, kill -TRAP, a trap while not recording with 0xCC not
//    ours): SIG_DFL is restored and the trap happens again, with the default action.
// Per-thread state (the instruction being stepped over) is initial-exec TLS: async-signal-safe.
#include <asm/prctl.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "runtime/soft/capture_internal.h"
#include "runtime/soft/decode.h"
#include "runtime/soft/modules.h"
#include "runtime/soft/proc_self.h"
#include "runtime/soft/sigtrap.h"

namespace whymiss::soft::capture::detail {

namespace {

constexpr greg_t kTrapFlag = 0x100;
constexpr uint8_t kInt3 = 0xCC;
constexpr uint64_t kPage = 4096;

struct StepState {
  uint64_t ip;      // instruction being stepped over (0: none)
  uint32_t slot;
  uint32_t window;
};
__thread StepState t_step __attribute__((tls_model("initial-exec"))) = {0, 0, 0};
__thread bool t_busy __attribute__((tls_model("initial-exec"))) = false;  // recording a capture
// The thread's tid and fs base, read once per init generation (each is a syscall of ~1.4 us on
// this VM; fs base cannot be read with rdfsbase here: no FSGSBASE in the guest).
struct ThreadCache {
  uint32_t gen;
  pid_t tid;
  uint64_t fs_base;
};
__thread ThreadCache t_cache __attribute__((tls_model("initial-exec"))) = {0, 0, 0};

bool in_child(const State& s) {
  if (s.alive) return s.alive->load(std::memory_order_relaxed) == 0;
  return s.pid != 0 && pid_t(syscall(SYS_getpid)) != s.pid;
}

uint64_t page_of(uint64_t a) { return a & ~(kPage - 1); }
uint8_t read_byte(uint64_t a) { return __atomic_load_n(reinterpret_cast<uint8_t*>(a), __ATOMIC_RELAXED); }
void write_byte(uint64_t a, uint8_t v) { __atomic_store_n(reinterpret_cast<uint8_t*>(a), v, __ATOMIC_RELAXED); }


// Another patch (not free) on the same page, or nullptr. Collector only.
const Patch* page_sharer(const State& s, uint32_t slot, uint64_t page) {
  for (uint32_t k = 0; k < kMaxSlots; ++k) {
    if (k == slot) continue;
    const Patch& o = s.patches[k];
    if (ctl_state(o.ctl.load(std::memory_order_relaxed)) != kPatchFree &&
        page_of(o.ip.load(std::memory_order_relaxed)) == page)
      return &o;
  }
  return nullptr;
}

// Code the int3 must never be on (modules.h): the stage's module is where the handler runs.
bool forbidden_module(uint64_t ip) {
  return soft::detail::breakpoint_forbidden(ip, reinterpret_cast<uint64_t>(&int3_on_sigtrap));
}


bool recently_patched(const State& s, uint64_t addr) {
  for (uint32_t k = 0; k < kMaxSlots; ++k)
    if (s.patches[k].ip.load(std::memory_order_relaxed) == addr) return true;
  for (uint32_t i = 0; i < kRecent; ++i)
    if (s.recent[i].load(std::memory_order_relaxed) == addr) return true;
  return false;
}

// Step completion: this thread ran the original instruction of (slot, window).
void step_done(State& s, ucontext_t* uc) {
  uc->uc_mcontext.gregs[REG_EFL] &= ~kTrapFlag;
  Patch& p = s.patches[t_step.slot];
  p.writers.fetch_add(1, std::memory_order_seq_cst);
  const uint64_t c = p.ctl.load(std::memory_order_seq_cst);
  if (ctl_window(c) == t_step.window &&
      (ctl_state(c) == kPatchArmed || ctl_state(c) == kPatchFull)) {
    const bool last = p.stepping.fetch_sub(1, std::memory_order_acq_rel) == 1;
    if (last && ctl_state(c) == kPatchArmed) write_byte(t_step.ip, kInt3);
  }
  p.writers.fetch_sub(1, std::memory_order_release);
  t_step.ip = 0;
}

}  // namespace

int int3_install() {
  State& s = g();
  struct sigaction old;
  if (sigaction(SIGTRAP, nullptr, &old) != 0) return errno;
  if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == int3_on_sigtrap) return 0;
  if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) {
    s.sigtrap_owned.fetch_add(1, std::memory_order_relaxed);
    return EBUSY;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = int3_on_sigtrap;
  // SIGTRAP itself is not blocked in the handler (SA_NODEFER): code the handler runs (libc,
  // the decoder) may be a patched instruction, and the kernel kills a thread that traps with
  // SIGTRAP blocked. Everything else is blocked while it runs.
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
  sigfillset(&sa.sa_mask);
  sigdelset(&sa.sa_mask, SIGTRAP);
  sigdelset(&sa.sa_mask, SIGSEGV);
  sigdelset(&sa.sa_mask, SIGBUS);
  sigdelset(&sa.sa_mask, SIGILL);
  sigdelset(&sa.sa_mask, SIGFPE);
  if (sigaction(SIGTRAP, &sa, nullptr) != 0) return errno;
  return 0;
}

int int3_patch(uint32_t slot, uint32_t w, uint64_t ip) {
  State& s = g();
  Patch& p = s.patches[slot];
  const uint8_t len = instruction_length(ip);
  if (len == 0 || len > kCodeBytes) return EINVAL;
  uint8_t code[kCodeBytes] = {};
  memcpy(code, reinterpret_cast<const void*>(ip), len);
  if (code[0] == kInt3 || forbidden_module(ip)) return EINVAL;
  {
    // A memory access? Decoded on a zeroed context (rcx = 1: a rep string op counts).
    ucontext_t uc;
    memset(&uc, 0, sizeof uc);
    _libc_fpstate fp;
    memset(&fp, 0, sizeof fp);
    uc.uc_mcontext.fpregs = &fp;
    uc.uc_mcontext.gregs[REG_RCX] = 1;
    RegisterView rv;
    rv.uc = &uc;
    MemAccess m;
    // pushf would store TF (set while stepping) where the program can pop it; popf/iret
    // restore it.
    if (decode_bytes(code, len, ip, rv, &m) != DecodeStatus::Ok || m.count == 0 || m.step_stop == kStepFlags)
      return EINVAL;
    // The sampling decoder caches each function's instruction boundaries the first time it
    // walks it; walked with an int3 inside, the bytes after it would decode misaligned for good.
    // Walk it now, from the original bytes (the result does not matter).
    decode_previous(ip + len, rv, &m);
  }
  if (soft::detail::some_thread_refuses_int3()) {
    s.sigtrap_blocked.fetch_add(1, std::memory_order_relaxed);
    return EAGAIN;  // not now (the window is not armed; the candidate gets its turn again)
  }
  const uint64_t page = page_of(ip);
  int prot = 0;
  if (const Patch* o = page_sharer(s, slot, page)) {
    prot = o->prot;  // already writable for the other window; its saved protection is the page's
  } else {
    if (const int err = soft::detail::mapping_prot(ip, &prot)) {
      note_failure(err);
      return err;
    }
    if (!(prot & PROT_WRITE) &&
        mprotect(reinterpret_cast<void*>(page), kPage, prot | PROT_WRITE | PROT_EXEC) != 0) {
      const int err = errno;
      note_failure(err);
      return err;
    }
  }
  memcpy(p.code, code, sizeof code);
  p.len = len;
  p.prot = prot;
  p.ip.store(ip, std::memory_order_relaxed);
  p.stepping.store(0, std::memory_order_relaxed);
  p.hits.store(0, std::memory_order_relaxed);
  p.writers.store(0, std::memory_order_relaxed);
  p.ctl.store(pack_ctl(w, kPatchArmed), std::memory_order_seq_cst);
  write_byte(ip, kInt3);
  return 0;
}

void int3_unpatch(uint32_t slot) {
  State& s = g();
  Patch& p = s.patches[slot];
  const uint64_t c = p.ctl.load(std::memory_order_relaxed);
  if (ctl_state(c) == kPatchFree) return;
  const uint64_t ip = p.ip.load(std::memory_order_relaxed);
  s.recent[s.recent_next++ % kRecent].store(ip, std::memory_order_relaxed);
  p.ctl.store(pack_ctl(ctl_window(c), kPatchClosed), std::memory_order_seq_cst);
  while (p.writers.load(std::memory_order_seq_cst) != 0) sched_yield();  // a few instructions
  // The code may have gone meanwhile (dlclose) or been replaced by another image at the same
  // address: write only if the page is still mapped and holds our instruction (its first byte
  // int3 or original, the rest of it, on this page, unchanged).
  const uint64_t page = page_of(ip);
  int prot_now = 0;
  bool ours = soft::detail::mapping_prot(ip, &prot_now) == 0;
  if (ours) {
    const uint8_t b = read_byte(ip);
    const size_t on_page = page + kPage - ip < p.len ? size_t(page + kPage - ip) : p.len;
    ours = (b == kInt3 || b == p.code[0]) &&
           memcmp(reinterpret_cast<const void*>(ip + 1), p.code + 1, on_page - 1) == 0;
  }
  if (ours && (prot_now & PROT_WRITE)) write_byte(ip, p.code[0]);
  p.ctl.store(pack_ctl(ctl_window(c), kPatchFree), std::memory_order_seq_cst);
  if (ours && !(p.prot & PROT_WRITE) && !page_sharer(s, slot, page))
    mprotect(reinterpret_cast<void*>(page), kPage, p.prot);
}

bool int3_handler_still_ours() {
  struct sigaction cur;
  if (sigaction(SIGTRAP, nullptr, &cur) != 0) return false;
  return (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == int3_on_sigtrap;
}

size_t int3_original_code(uint64_t ip, uint8_t* out, size_t max) {
  const State& s = g();
  for (uint32_t k = 0; k < kMaxSlots; ++k) {
    const Patch& p = s.patches[k];
    const uint64_t c = p.ctl.load(std::memory_order_acquire);
    if (ctl_state(c) == kPatchFree || p.ip.load(std::memory_order_acquire) != ip) continue;
    const size_t n = p.len < max ? p.len : max;
    memcpy(out, p.code, n);
    // Still the same window after the copy: the bytes are that window's.
    if (p.ctl.load(std::memory_order_acquire) != c) return 0;
    return n;
  }
  return 0;
}

void int3_mark_owner() {
  State& s = g();
  if (!s.alive) {
    void* m = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    if (madvise(m, kPage, MADV_WIPEONFORK) != 0) {
      munmap(m, kPage);
      return;  // getpid() per trap instead
    }
    s.alive = new (m) std::atomic<uint32_t>(0);
  }
  s.alive->store(1, std::memory_order_release);
}

void int3_restore_in_child() {
  State& s = g();
  uint32_t expect = 0;
  if (!s.child_restore.compare_exchange_strong(expect, 1, std::memory_order_acq_rel)) {
    while (s.child_restore.load(std::memory_order_acquire) != 2) sched_yield();
    return;
  }
  bool restored[kMaxSlots] = {};
  for (uint32_t k = 0; k < kMaxSlots; ++k) {
    Patch& p = s.patches[k];
    const uint64_t c = p.ctl.load(std::memory_order_relaxed);
    if (ctl_state(c) == kPatchFree) continue;
    restored[k] = true;
    const uint64_t ip = p.ip.load(std::memory_order_relaxed);
    void* page = reinterpret_cast<void*>(page_of(ip));
    // The page may be writable (inherited mid-window) or not: make sure, then put it back.
    if (mprotect(page, kPage, p.prot | PROT_READ | PROT_WRITE | PROT_EXEC) == 0) {
      if (read_byte(ip) == kInt3) write_byte(ip, p.code[0]);
    }
    p.ctl.store(pack_ctl(ctl_window(c), kPatchFree), std::memory_order_release);
  }
  for (uint32_t k = 0; k < kMaxSlots; ++k) {  // only the pages of the patches restored above
    const Patch& p = s.patches[k];
    if (restored[k] && p.prot)
      mprotect(reinterpret_cast<void*>(page_of(p.ip.load(std::memory_order_relaxed))), kPage, p.prot);
  }
  s.child_restore.store(2, std::memory_order_release);
}

void int3_on_sigtrap(int, siginfo_t* si, void* ctx) {
  const int saved_errno = errno;
  State& s = g();
  auto* uc = static_cast<ucontext_t*>(ctx);
  const uint64_t rip = uint64_t(uc->uc_mcontext.gregs[REG_RIP]);
  if (si->si_code == TRAP_TRACE && t_step.ip) {  // our single step over the original instruction
    step_done(s, uc);
    errno = saved_errno;
    return;
  }
  if (si->si_code == TRAP_TRACE) {
    // A step whose bookkeeping was dropped (see the stale t_step below): TF can only be ours,
    // since a program that single-steps itself owns SIGTRAP and this handler is not installed.
    uc->uc_mcontext.gregs[REG_EFL] &= ~kTrapFlag;
    s.int3_stale.fetch_add(1, std::memory_order_relaxed);
    errno = saved_errno;
    return;
  }
  if (si->si_code != SI_KERNEL || rip == 0) {
    sigtrap_default_action(si, uc);
    errno = saved_errno;
    return;
  }
  const uint64_t addr = rip - 1;
  if (in_child(s)) {
    if (recently_patched(s, addr)) {
      int3_restore_in_child();
      if (read_byte(addr) != kInt3) {
        uc->uc_mcontext.gregs[REG_RIP] = greg_t(addr);
        errno = saved_errno;
        return;
      }
    }
    sigtrap_default_action(si, uc);
    errno = saved_errno;
    return;
  }
  // A patched instruction? (A stepping thread that meets a re-inserted int3 at its own ip comes
  // through here too: it restores again and keeps its TF: a bounce.)
  const bool tf = (uc->uc_mcontext.gregs[REG_EFL] & kTrapFlag) != 0;
  // A step that never completed (a handler of another signal longjmp'ed away before the
  // instruction ran) leaves t_step behind: forgotten once its window has ended (its `stepping`
  // count stays, so that window re-inserted no more: safe).
  if (t_step.ip && ctl_window(s.patches[t_step.slot].ctl.load(std::memory_order_acquire)) != t_step.window)
    t_step.ip = 0;
  const bool bounce = t_step.ip == addr && tf;
  // Nested: a hit while this thread is already stepping over another instruction (a handler of
  // another signal ran patched code in between) or inside this handler's recording (the patched
  // instruction is in code the handler uses). It is run unobserved: one step at a time per thread,
  // and the capture buffers are not re-entrant.
  const bool nested = (t_step.ip && !bounce) || t_busy;
  for (uint32_t k = 0; k < kMaxSlots; ++k) {
    Patch& p = s.patches[k];
    const uint64_t c0 = p.ctl.load(std::memory_order_acquire);
    if (ctl_state(c0) == kPatchFree || p.ip.load(std::memory_order_acquire) != addr) continue;
    const uint32_t w = ctl_window(c0);
    bool step = false, full = false;
    p.writers.fetch_add(1, std::memory_order_seq_cst);
    const uint64_t c = p.ctl.load(std::memory_order_seq_cst);
    if (ctl_window(c) == w && (ctl_state(c) == kPatchArmed || ctl_state(c) == kPatchFull)) {
      full = ctl_state(c) == kPatchFull;
      if (read_byte(addr) == kInt3) write_byte(addr, p.code[0]);
      if (!bounce && !nested && ctl_state(c) == kPatchArmed) {
        p.stepping.fetch_add(1, std::memory_order_acq_rel);
        step = true;
      }
    }
    p.writers.fetch_sub(1, std::memory_order_release);
    uc->uc_mcontext.gregs[REG_RIP] = greg_t(addr);
    if (bounce) {
      s.int3_bounces.fetch_add(1, std::memory_order_relaxed);  // TF is still set: step again
    } else if (step) {
      const uint32_t hits = p.hits.fetch_add(1, std::memory_order_relaxed) + 1;
      if (hits >= p.limit.load(std::memory_order_relaxed)) {
        uint64_t expect = pack_ctl(w, kPatchArmed);
        p.ctl.compare_exchange_strong(expect, pack_ctl(w, kPatchFull), std::memory_order_seq_cst);
      }
      const uint32_t gen = s.gen.load(std::memory_order_relaxed);
      if (t_cache.gen != gen) {
        t_cache.tid = pid_t(syscall(SYS_gettid));
        uint64_t fs = 0;
        syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
        t_cache.fs_base = fs;
        t_cache.gen = gen;
      }
      t_busy = true;
      if (!int3_capture(w, p.code, p.len, addr, uc, t_cache.tid, t_cache.fs_base))
        s.int3_passed.fetch_add(1, std::memory_order_relaxed);
      t_busy = false;
      t_step.ip = addr;
      t_step.slot = k;
      t_step.window = w;
      uc->uc_mcontext.gregs[REG_EFL] |= kTrapFlag;
    } else if (nested || full) {
      // Byte restored, run unobserved. Nested: the int3 is lost for this window (it ends by
      // time). Full: a late re-insert met after the hit limit; the window ends at the next tick.
      s.int3_passed.fetch_add(1, std::memory_order_relaxed);
    } else {
      s.int3_stale.fetch_add(1, std::memory_order_relaxed);  // closing: run it unobserved
    }
    errno = saved_errno;
    return;
  }
  if (recently_patched(s, addr) && read_byte(addr) != kInt3) {
    // Taken just before the collector removed the int3: run the original instruction.
    uc->uc_mcontext.gregs[REG_RIP] = greg_t(addr);
    s.int3_stale.fetch_add(1, std::memory_order_relaxed);
    errno = saved_errno;
    return;
  }
  sigtrap_default_action(si, uc);
  errno = saved_errno;
}

}  // namespace whymiss::soft::capture::detail
