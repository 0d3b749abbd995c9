// Breakpoints of trace runs (see trace_patches.h for the protocol).
#include "runtime/soft/trace_patches.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/soft/modules.h"
#include "runtime/soft/proc_self.h"

namespace whymiss::soft::trace::patches {
namespace {

constexpr uint8_t kInt3 = 0xCC;
constexpr uint64_t kPage = 4096;
constexpr uint32_t kEntries = 8192;  // power of two
constexpr uint32_t kProbe = 32;
constexpr uint32_t kPages = 256;

enum PageState : uint8_t { kPageClaimed = 0, kPageWritable = 1, kPageGone = 2 };
struct Page {
  std::atomic<uint64_t> page;  // 0: free
  std::atomic<uint8_t> state;
  int prot;  // what it was before
};

struct Table {
  Entry entries[kEntries];
  Page pages[kPages];
};

constexpr uint32_t kSlot = 32;  // an instruction (<= 15 bytes) and `jmp [rip]; .quad next` (14)

Table* g_table = nullptr;
uint8_t* g_scratch = nullptr;  // kEntries slots, executable; null: no out-of-line copies
uint64_t g_own_ip = 0;
bool g_calls = true;
std::atomic<uint32_t> g_writers{0};
std::atomic<bool> g_open{true};
std::atomic<bool> g_removing{false};
std::atomic<uint32_t> g_live{0};
std::atomic<uint64_t> g_armed{0}, g_refused{0}, g_strays{0};

uint32_t slot_of(uint64_t ip) { return uint32_t((ip * 0x9e3779b97f4a7c15ull) >> 40) & (kEntries - 1); }

// The page list is probed linearly from a hash of the page (insertions claim the first free
// slot; slots are freed only by remove_all, with no insert running).
uint32_t page_slot(uint64_t page) { return uint32_t((page >> 12) * 0x9e3779b97f4a7c15ull >> 48) & (kPages - 1); }

// Makes the page of ip writable (once per page until remove_all). False if it cannot now.
bool writable(uint64_t ip) {
  const uint64_t page = ip & ~(kPage - 1);
  const uint32_t h = page_slot(page);
  for (uint32_t k = 0; k < kPages; ++k) {
    Page& p = g_table->pages[(h + k) & (kPages - 1)];
    uint64_t cur = p.page.load(std::memory_order_acquire);
    if (cur == page) return p.state.load(std::memory_order_acquire) == kPageWritable;
    if (cur != 0) continue;
    if (!p.page.compare_exchange_strong(cur, page, std::memory_order_acq_rel)) {
      if (cur == page) return p.state.load(std::memory_order_acquire) == kPageWritable;
      continue;
    }
    int prot = 0;
    if (detail::mapping_prot(page, &prot) != 0 || !(prot & PROT_EXEC) ||
        mprotect(reinterpret_cast<void*>(page), kPage, prot | PROT_READ | PROT_WRITE) != 0) {
      // Left claimed: the page is refused until remove_all frees the list.
      return false;
    }
    p.prot = prot;
    p.state.store(kPageWritable, std::memory_order_release);
    return true;
  }
  return false;
}

const Page* page_of(uint64_t ip) {
  const uint64_t page = ip & ~(kPage - 1);
  const uint32_t h = page_slot(page);
  for (uint32_t k = 0; k < kPages; ++k) {
    const Page& p = g_table->pages[(h + k) & (kPages - 1)];
    const uint64_t cur = p.page.load(std::memory_order_acquire);
    if (cur == page) return &p;
    if (cur == 0) return nullptr;
  }
  return nullptr;
}

Entry* lookup(uint64_t ip) {
  if (!g_table) return nullptr;
  const uint32_t h = slot_of(ip);
  for (uint32_t k = 0; k < kProbe; ++k) {
    Entry& e = g_table->entries[(h + k) & (kEntries - 1)];
    const uint64_t cur = e.ip.load(std::memory_order_acquire);
    if (cur == ip) return &e;
    if (cur == 0) return nullptr;
  }
  return nullptr;
}

struct Writer {
  Writer() { g_writers.fetch_add(1, std::memory_order_seq_cst); }
  ~Writer() { g_writers.fetch_sub(1, std::memory_order_release); }
};

}  // namespace

int init(uint64_t own_ip) {
  if (!g_table) {
    void* m = mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return errno;
    g_table = static_cast<Table*>(m);  // all zero: free entries and pages (touched as used)
    // Read, write and execute: slots are written by handlers as breakpoints are armed. A system
    // that refuses such mappings (SELinux execmem) only loses the out-of-line breakpoints.
    void* x = mmap(nullptr, size_t(kEntries) * kSlot, PROT_READ | PROT_WRITE | PROT_EXEC,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_scratch = x == MAP_FAILED ? nullptr : static_cast<uint8_t*>(x);
  } else {
    remove_all();
    memset(static_cast<void*>(g_table), 0, sizeof(Table));
  }
  g_own_ip = own_ip;
  g_live.store(0);
  g_armed.store(0);
  g_refused.store(0);
  g_strays.store(0);
  g_open.store(true);
  // CET shadow stack (ARCH_SHSTK_STATUS, Linux 6.6+): with it on, a return address the handler
  // pushes is not on the shadow stack, and the program's own ret would fault.
  unsigned long features = 0;
  g_calls = !(syscall(SYS_arch_prctl, 0x5005, &features) == 0 && (features & 1));
  return 0;
}

bool calls_allowed() { return g_calls; }

const Entry* find(uint64_t ip) {
  const Entry* e = lookup(ip);
  return e && e->armed.load(std::memory_order_acquire) ? e : nullptr;
}

bool insert(uint64_t ip, const uint8_t* code, uint8_t len, const RunInfo& run) {
  const uint8_t original = code[0];
  if (!g_table || ip == 0 || original == kInt3 || len == 0 || len > 15) return false;
  if ((run.role == kRunCall || run.role == kRunRet) && !g_calls) return false;
  if (run.role == kRunPlain && (!g_scratch || run.rip_relative)) return false;
  if (run.role == kRunStop) return false;
  Writer w;
  if (!g_open.load(std::memory_order_seq_cst)) return false;
  const uint32_t h = slot_of(ip);
  Entry* e = nullptr;
  for (uint32_t k = 0; k < kProbe && !e; ++k) {
    Entry& c = g_table->entries[(h + k) & (kEntries - 1)];
    uint64_t cur = c.ip.load(std::memory_order_acquire);
    if (cur == 0) {
      if (c.ip.compare_exchange_strong(cur, ip, std::memory_order_acq_rel)) {
        // A fresh entry: state is kClaimed (the table is zeroed and entries are never freed).
        if (detail::breakpoint_forbidden(ip, g_own_ip)) {
          c.state.store(kRefused, std::memory_order_release);
          g_refused.fetch_add(1, std::memory_order_relaxed);
          return false;
        }
        c.original = original;
        c.role = run.role;
        c.cond = run.cond;
        c.len = len;
        c.pop = run.pop;
        c.target = run.target;
        if (run.role == kRunPlain) {  // the copy, then jmp [rip + 0] to the next instruction
          uint8_t* slot = g_scratch + size_t(&c - g_table->entries) * kSlot;
          for (uint8_t i = 0; i < len; ++i) slot[i] = code[i];
          const uint8_t jmp[6] = {0xFF, 0x25, 0, 0, 0, 0};
          for (int i = 0; i < 6; ++i) slot[len + i] = jmp[i];
          const uint64_t next = ip + len;
          for (int i = 0; i < 8; ++i) slot[len + 6 + i] = uint8_t(next >> (8 * i));
        }
        e = &c;
        break;
      }
    }
    if (cur != ip) continue;
    uint8_t st = c.state.load(std::memory_order_acquire);
    if (st == kLive) return true;
    if (st != kRemoved || !c.state.compare_exchange_strong(st, kClaimed, std::memory_order_acq_rel))
      return false;  // refused, or another thread is arming it
    // Re-arming: the code must still be what the entry was made for (a library unloaded and
    // another loaded at its address would otherwise run the old instruction).
    bool same = c.original == original && c.len == len && c.role == run.role;
    if (same && run.role == kRunPlain) {
      const uint8_t* slot = g_scratch + size_t(&c - g_table->entries) * kSlot;
      for (uint8_t i = 0; i < len && same; ++i) same = slot[i] == code[i];
    } else if (same) {
      same = c.target == run.target && c.cond == run.cond && c.pop == run.pop;
    }
    if (!same) {  // other code now (its byte is not ours: remove_all restored it)
      c.armed.store(0, std::memory_order_release);
      c.state.store(kRefused, std::memory_order_release);
      g_refused.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    e = &c;
  }
  if (!e) {
    g_refused.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (!writable(ip)) {
    e->state.store(kRemoved, std::memory_order_release);  // try again after the next remove_all
    g_refused.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  e->armed.store(1, std::memory_order_release);
  e->state.store(kLive, std::memory_order_release);
  g_live.fetch_add(1, std::memory_order_relaxed);
  __atomic_store_n(reinterpret_cast<uint8_t*>(ip), kInt3, __ATOMIC_RELEASE);
  g_armed.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void take(uint64_t ip, uint8_t len, const RunInfo& run, ucontext_t* uc) {
  greg_t* r = uc->uc_mcontext.gregs;
  switch (run.role) {
    case kRunBranch:
      r[REG_RIP] = greg_t(branch_taken(run.cond, uint64_t(r[REG_EFL])) ? run.target : ip + len);
      break;
    case kRunCall: {
      // Below the interrupted rsp lies the red zone, never the signal frame (the kernel puts
      // that 128 bytes further down), so the return slot is the program's own.
      const uint64_t sp = uint64_t(r[REG_RSP]) - 8;
      *reinterpret_cast<uint64_t*>(sp) = ip + len;
      r[REG_RSP] = greg_t(sp);
      r[REG_RIP] = greg_t(run.target);
      break;
    }
    case kRunRet: {
      const uint64_t sp = uint64_t(r[REG_RSP]);
      r[REG_RIP] = greg_t(*reinterpret_cast<const uint64_t*>(sp));
      r[REG_RSP] = greg_t(sp + 8 + run.pop);
      break;
    }
    default:
      break;
  }
}

void take(const Entry& e, ucontext_t* uc) {
  if (e.role == kRunPlain) {
    uc->uc_mcontext.gregs[REG_RIP] = greg_t(g_scratch + size_t(&e - g_table->entries) * kSlot);
    return;
  }
  RunInfo run;
  run.role = e.role;
  run.cond = e.cond;
  run.pop = e.pop;
  run.target = e.target;
  take(e.ip.load(std::memory_order_relaxed), e.len, run, uc);
}

uint64_t resume_at(uint64_t ip) {
  const Entry* e = lookup(ip);
  if (!e || e->role != kRunPlain || e->state.load(std::memory_order_acquire) != kLive ||
      __atomic_load_n(reinterpret_cast<const uint8_t*>(ip), __ATOMIC_ACQUIRE) != kInt3)
    return ip;
  return reinterpret_cast<uint64_t>(g_scratch + size_t(e - g_table->entries) * kSlot);
}

bool after_copy(uint64_t rip, uint64_t* next) {
  if (!g_scratch || rip < uint64_t(g_scratch) || rip >= uint64_t(g_scratch) + size_t(kEntries) * kSlot)
    return false;
  const size_t k = (rip - uint64_t(g_scratch)) / kSlot;
  const Entry& e = g_table->entries[k];
  if (rip - uint64_t(g_scratch) - k * kSlot != e.len) return false;
  *next = e.ip.load(std::memory_order_relaxed) + e.len;
  return true;
}

bool original_byte(uint64_t ip, uint8_t* out) {
  const Entry* e = lookup(ip);
  if (!e || e->state.load(std::memory_order_acquire) != kLive) return false;
  *out = e->original;
  return true;
}

bool live_at(uint64_t ip) {
  const Entry* e = lookup(ip);
  return e && e->state.load(std::memory_order_acquire) == kLive &&
         __atomic_load_n(reinterpret_cast<const uint8_t*>(ip), __ATOMIC_ACQUIRE) == kInt3;
}

void remove_all(bool in_child) {
  if (!g_table) return;
  if (in_child) {
    g_writers.store(0, std::memory_order_relaxed);
    g_removing.store(false, std::memory_order_relaxed);
  }
  if (g_removing.exchange(true, std::memory_order_acq_rel)) return;
  g_open.store(false, std::memory_order_seq_cst);
  // Handlers inside insert finish in microseconds unless descheduled: yield until they leave,
  // but not forever (a fatal signal taken inside insert would wait for itself): then the
  // breakpoints stay, still taken by the handler.
  for (uint32_t spins = 0; g_writers.load(std::memory_order_seq_cst) != 0; ++spins) {
    if (spins == 100000) {
      g_open.store(true, std::memory_order_seq_cst);
      g_removing.store(false, std::memory_order_release);
      return;
    }
    sched_yield();
  }
  // A page whose mapping went (dlclose) is not written: its entries are dropped. One the
  // program made read-only again (its own mprotect) is made writable for the restore.
  for (Page& p : g_table->pages) {
    const uint64_t page = p.page.load(std::memory_order_relaxed);
    int prot = 0;
    if (!page || p.state.load(std::memory_order_relaxed) != kPageWritable) continue;
    if (detail::mapping_prot(page, &prot) != 0 || !(prot & PROT_EXEC) ||
        (!(prot & PROT_WRITE) && mprotect(reinterpret_cast<void*>(page), kPage, prot | PROT_WRITE) != 0))
      p.state.store(kPageGone, std::memory_order_relaxed);
  }
  if (g_live.load(std::memory_order_relaxed) != 0) {
    for (Entry& e : g_table->entries) {
      if (e.state.load(std::memory_order_acquire) != kLive) continue;
      const uint64_t ip = e.ip.load(std::memory_order_relaxed);
      const Page* p = page_of(ip);
      if (!p || p->state.load(std::memory_order_relaxed) != kPageWritable ||
          __atomic_load_n(reinterpret_cast<const uint8_t*>(ip), __ATOMIC_ACQUIRE) != kInt3) {
        // Not ours any more: a trap there is someone else's.
        e.armed.store(0, std::memory_order_release);
        e.state.store(kRefused, std::memory_order_release);
        continue;
      }
      __atomic_store_n(reinterpret_cast<uint8_t*>(ip), e.original, __ATOMIC_RELEASE);
      e.state.store(kRemoved, std::memory_order_release);
    }
    g_live.store(0, std::memory_order_relaxed);
  }
  for (Page& p : g_table->pages) {
    const uint64_t page = p.page.load(std::memory_order_relaxed);
    if (!page) continue;
    if (p.state.load(std::memory_order_relaxed) == kPageWritable)
      mprotect(reinterpret_cast<void*>(page), kPage, p.prot);
    p.state.store(kPageClaimed, std::memory_order_relaxed);
    p.page.store(0, std::memory_order_release);
  }
  g_open.store(true, std::memory_order_seq_cst);
  g_removing.store(false, std::memory_order_release);
}

uint32_t live() { return g_live.load(std::memory_order_relaxed); }

Stats stats() {
  return {g_armed.load(std::memory_order_relaxed), g_refused.load(std::memory_order_relaxed),
          g_strays.load(std::memory_order_relaxed)};
}

void count_stray() { g_strays.fetch_add(1, std::memory_order_relaxed); }

}  // namespace whymiss::soft::trace::patches
