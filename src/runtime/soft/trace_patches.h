// Breakpoints of trace runs (internal to soft/trace.cpp; see trace.h, "Runs").
//
// A window that lets straight-line code run natively puts an int3 (0xCC) on the first byte of the
// instruction that ends the stretch: a direct jmp or jcc, a direct call or a ret (RunInfo of
// decode.h), or a plain instruction whose address the stretch could not know in advance (it
// uses a register an earlier instruction of the stretch writes). Each breakpoint's entry holds
// what the instruction does, so that any thread reaching it, in a window or not, can take it in
// the SIGTRAP handler without decoding: a control transfer by setting rip (and for call/ret rsp
// and the return slot); a plain instruction by running a copy of it *out of line*, in the entry's
// slot of an executable scratch area, followed by a jump back to the next instruction (only
// instructions with no rip-relative operand, which run the same anywhere). So the original
// instruction never has to run in place, and the byte stays 0xCC until remove_all(). A fault of
// a copy shows the slot's address as rip (documented limit).
//
// Protocol (every function async-signal-safe, lock-free except remove_all's wait):
//  - insert: a handler announces itself in `writers` [seq_cst], then checks the gate; only an open
//    gate lets it claim an entry, make the page writable (PROT_EXEC kept) and write the 0xCC. The
//    entry is filled and marked live before the byte is written, so a thread that traps on it
//    always finds what to do.
//  - remove_all: closes the gate [seq_cst], waits until no writer is inside (by the store/load
//    order, a writer either saw the gate closed or is waited for), writes every original byte back,
//    restores the pages and opens the gate again. Entries stay (removed), so a trap taken just
//    before its byte was restored is recognised (the byte in memory is no longer 0xCC: the
//    handler re-runs the original instruction) and the same instruction is re-armed cheaply later.
//  - cross-modifying code: only first bytes change, by single-byte stores (the pattern of
//    text_poke_bp and uprobes): a CPU sees either the original instruction or the int3.
//  - never in code a handler of ours runs or that runs with SIGTRAP blocked (modules.h,
//    breakpoint_forbidden): a trap there would kill the thread.
#pragma once
#include <ucontext.h>

#include <atomic>
#include <cstdint>

#include "runtime/soft/decode.h"

namespace whymiss::soft::trace::patches {

enum EntryState : uint8_t { kClaimed = 0, kLive = 1, kRemoved = 2, kRefused = 3 };

struct Entry {
  std::atomic<uint64_t> ip;  // 0: free
  std::atomic<uint8_t> state;
  uint8_t original;  // the instruction's first byte
  std::atomic<uint8_t> armed;  // a 0xCC was written once: the fields below are valid for good
  uint8_t role;      // RunRole: kRunBranch, kRunCall, kRunRet, or kRunPlain (out of line)
  uint8_t cond;      // kRunBranch
  uint8_t len;
  uint16_t pop;      // kRunRet
  uint64_t target;   // kRunBranch, kRunCall
};

// Maps the table. `own_ip`: an address in the caller's module (breakpoint_forbidden). Returns 0
// or the errno of mmap. Call again only when no handler can run (tests).
int init(uint64_t own_ip);
// Whether call and ret may be taken by the handler (not under a CET shadow stack, which would
// see a return address it did not push).
bool calls_allowed();

// The entry for ip if a breakpoint was ever armed there (its fields valid, whatever its state
// now: a trap taken just before a removal may be handled while the entry is being re-armed),
// else nullptr.
const Entry* find(uint64_t ip);
// Puts a breakpoint on the instruction at ip, whose `len` bytes as the program has them are
// `code`, taken as `run` says (a kRunPlain one only without rip-relative operands and while
// the scratch area could be mapped). True when it is in place (now or already). False when it
// cannot be now: forbidden code, table or page list full, the page cannot be made writable,
// another thread is arming the same instruction or page, or the gate is closed.
bool insert(uint64_t ip, const uint8_t* code, uint8_t len, const RunInfo& run);
// Where a thread about to run the instruction at ip continues: its out-of-line copy if a plain
// breakpoint is live there, else ip itself.
uint64_t resume_at(uint64_t ip);
// rip inside an out-of-line copy's slot, at the jump back (a single step of the copy ended
// there): the instruction after the original, in *next. False if rip is not in the area.
bool after_copy(uint64_t rip, uint64_t* next);
// Takes the instruction of `e` (at e.ip, not yet run) in uc.
void take(const Entry& e, ucontext_t* uc);
// The same for a decoded instruction (role kRunBranch, kRunCall or kRunRet).
void take(uint64_t ip, uint8_t len, const RunInfo& run, ucontext_t* uc);
// The program's first byte at ip while a breakpoint is there (the decoder's hook).
bool original_byte(uint64_t ip, uint8_t* out);
// Whether a breakpoint of ours is in place at ip now.
bool live_at(uint64_t ip);

// Removes every breakpoint and restores the pages' protection. A page whose mapping has gone
// or lost write/exec since (dlclose, the program's own mprotect) is left alone and its entries
// are dropped; a re-armed entry must match the code it was made for. Returns at once if another
// thread is removing them right now. `in_child`: in a forked child, where the parent's other
// threads (maybe inside insert at the fork) do not exist.
void remove_all(bool in_child = false);
// Breakpoints in place now.
uint32_t live();

struct Stats {
  uint64_t armed;    // 0xCC written (re-arming a removed entry counts again)
  uint64_t refused;  // inserts that could not be done
  uint64_t strays;   // traps on a breakpoint removed meanwhile
};
Stats stats();
void count_stray();

}  // namespace whymiss::soft::trace::patches
