// Instruction decoding for the soft collector (Zydis): which instruction a task-clock sample or a
// breakpoint belongs to, and which address it accesses, computed from the signal context.
//
// Contract: every function here is async-signal-safe once init() has returned: no malloc, no
// locks that a non-handler path holds, no stdio. Memory comes from a fixed mmap'ed arena given
// at init; when it is exhausted, lookups fail (and are counted) rather than allocate.
#pragma once
#include <cstddef>
#include <cstdint>
#include <ucontext.h>

namespace whymiss::soft {

inline constexpr int kMaxMemOperands = 2;  // e.g. movs: source and destination

struct MemOperand {
  uint64_t addr = 0;  // effective (linear) address, fs/gs base applied
  uint16_t size = 0;  // bytes accessed
  uint8_t flags = 0;  // profile::kAccessRead | kAccessWrite
  bool stack = false; // an implicit stack slot (push, pop, call, ret, enter, leave)
};

// Instructions that single-stepping must treat specially (MemAccess::step_stop).
enum StepStop : uint8_t {
  kStepFree = 0,
  kStepSyscall = 1,  // `syscall`: safe to step for most system calls; the caller decides by number
  kStepFlags = 2,    // reads or restores the trap flag (pushf, popf, iret)
  kStepKernel = 3,   // another way into the kernel (sysenter, int n, int3, into, int1)
};

// A decoded memory instruction and the addresses it accesses given a register state.
// ip and length are filled whenever the instruction was identified, whatever the status.
struct MemAccess {
  uint64_t ip = 0;     // start of the instruction
  uint8_t length = 0;  // its length in bytes
  uint8_t count = 0;   // operands filled in `ops`
  // Set whatever the status once the instruction was identified, for a thread that
  // single-steps itself (trace windows) or steps over a breakpoint (see StepStop).
  uint8_t step_stop = 0;
  MemOperand ops[kMaxMemOperands];
};

enum class DecodeStatus {
  Ok,
  NotMemory,   // the instruction accesses no data memory (profile::DiscardReason::NotMemory)
  Clobbered,   // (after-the-fact use only) it overwrote a register its address depends on
  NoBoundary,  // no known instruction boundary before the ip (no symbol and the heuristic gave
               // no answer, arena full), or the instruction before it transfers control away
               // (call, ret, jmp), so it is not what ran just before: the predecessor is unknown
  BadBytes,    // undecodable, or an operand form not evaluated (VSIB index in xmm16-31)
};

// Reads the registers an address needs from a signal context; fs/gs bases are read once per
// thread with arch_prctl at thread start and passed in (the context does not carry them).
// Uses uc_mcontext.gregs, and uc_mcontext.fpregs (xmm0-15) for the index of gathers/scatters.
struct RegisterView {
  const ucontext_t* uc = nullptr;
  uint64_t fs_base = 0, gs_base = 0;
};

// Sets up the function-start tables of the loaded modules (dl_iterate_phdr + .symtab/.dynsym
// of each module's file, mmap'ed) and the decoded-function cache. Not async-signal-safe; called
// once at runtime start and again (refresh_modules) after dlopen. Returns false when it cannot
// set up at all (the soft collector then disables itself). Calling init again discards the
// previous state (tests); only when no handler can be running. refresh_modules keeps the cache
// and must not run concurrently with itself (handlers may run: the old table is never unmapped).
// Arena: 1 MiB held 6,200+ functions of libc/libstdc++ (~54 instructions each; bench/).
bool init(size_t arena_bytes);
void refresh_modules();

// Task-clock samples: the signal interrupted the program at `next_ip`, the instruction *after*
// the one that was executing. Finds the preceding instruction (decoding forward from the start
// of its function, cached per function) and, if it is a memory instruction whose address
// registers it did not overwrite, fills `out` with its operands as they were before it ran.
// A rep-prefixed string instruction is interruptible: a sample taken while it runs has next_ip
// equal to the string instruction itself, with rsi/rdi/rcx advanced. So if the instruction at
// next_ip is a rep string op with rcx != 0, the sample is attributed to it, with the address of
// the iteration about to run. A completed string op before next_ip gets its last iteration.
// Limitation: when next_ip is a jump target, the instruction before it in memory is taken as the
// predecessor although the jump ran last (unknowable from the context); after an instruction
// that cannot fall through (call, jmp, ret) the sample is refused as NoBoundary instead.
DecodeStatus decode_previous(uint64_t next_ip, const RegisterView& regs, MemAccess* out);

// Breakpoints: the instruction at `ip` has not executed yet (the registers are its inputs).
// A rep string op reports the iteration about to run (rcx == 0: NotMemory). Reads the code at
// ip: while an int3 is patched there, use decode_bytes on the saved original bytes instead.
DecodeStatus decode_at(uint64_t ip, const RegisterView& regs, MemAccess* out);

// The same on a copy of the instruction's bytes (`len` readable bytes at `code`) that runs at
// `ip`: for breakpoints, whose first byte in memory is the int3, and for tests and fuzzing.
DecodeStatus decode_bytes(const uint8_t* code, size_t len, uint64_t ip, const RegisterView& regs,
                          MemAccess* out);
// Like decode_previous once the instruction is known: `code` holds the instruction at `ip`, which
// has just executed, and `regs` is the state after it (undoes push/pop/string-op updates, reports
// Clobbered when a register the address needs was overwritten otherwise).
DecodeStatus decode_after_bytes(const uint8_t* code, size_t len, uint64_t ip,
                                const RegisterView& regs, MemAccess* out);

// Trace runs (trace.h): how an instruction takes part in straight-line code that a window lets
// run natively between two breakpoints. The handler takes a RunBranch, RunCall or RunRet itself
// (it sets rip, and rsp and the return slot for call/ret), so one breakpoint on it costs one trap
// whatever the outcome; a RunPlain falls through to the next instruction and may run natively
// once its addresses are recorded; a RunStop must be single-stepped (it moves rip through a
// register or memory, enters the kernel, repeats as a rep string, reads or restores the flags,
// uses vector indices, writes a segment base, aborts or traps).
enum RunRole : uint8_t { kRunStop = 0, kRunPlain = 1, kRunBranch = 2, kRunCall = 3, kRunRet = 4 };
struct RunInfo {
  uint8_t role = kRunStop;
  uint8_t cond = 0;          // kRunBranch: jcc condition, the low nibble of its 0x7X opcode; 16 = jmp
  uint16_t pop = 0;          // kRunRet: bytes `ret imm16` releases beyond the return address
  uint64_t target = 0;       // kRunBranch, kRunCall: the destination
  uint32_t address_regs = 0; // GPRs (bit per GPR64 id: rax rcx rdx rbx rsp rbp rsi rdi r8..r15)
                             // the recorded memory operands' addresses read (not implicit
                             // stack slots: push, pop, call, ret; their addresses go unrecorded)
  uint32_t written_regs = 0; // GPRs it writes, any width, hidden operands included
  bool rip_relative = false; // an operand is addressed relative to rip (it cannot run elsewhere)
};
// decode_bytes plus the instruction's RunInfo (its role is kRunStop whenever the status is
// BadBytes). Async-signal-safe.
DecodeStatus decode_step(const uint8_t* code, size_t len, uint64_t ip, const RegisterView& regs,
                         MemAccess* out, RunInfo* run);
// The owner of run breakpoints tells the decoder the program's first byte of an instruction it
// patched with 0xCC (true and *original set), so that the boundaries of functions decoded while
// breakpoints are in place are the program's. Null: none. The function must be async-signal-safe.
void set_patched_byte(bool (*fn)(uint64_t ip, uint8_t* original));
// Whether a RunBranch with condition `cond` is taken under `rflags`.
bool branch_taken(uint8_t cond, uint64_t rflags);

// Length of the instruction at ip (0 if undecodable); used to place and step over breakpoints
// (read it before patching an int3 in).
uint8_t instruction_length(uint64_t ip);

// Counters for the report: lookups that failed by cause, cache hits/misses.
struct DecodeStats {
  uint64_t functions_cached;  // functions whose boundaries are in the arena
  uint64_t cache_full;        // lookups that failed because the arena or its table was full
  uint64_t no_symbol;         // ips in no module, or in no function symbol (heuristic tried)
  uint64_t bad_bytes;         // undecodable instructions or next_ip not on a decoded boundary
  uint64_t cache_hits;        // decode_previous lookups answered by the cache
  uint64_t heuristic_found;   // no-symbol lookups the backward heuristic answered
};
DecodeStats stats();

}  // namespace whymiss::soft
