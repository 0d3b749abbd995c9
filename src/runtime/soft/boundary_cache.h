// Instruction boundaries for the soft collector: which instruction ends exactly at a given ip.
//
// Per function, the start offsets of its instructions (decoded forward from the symbol's start)
// are kept in a fixed mmap'ed arena: an open-addressed table of slots plus a bump-allocated
// data area. Lookups and insertions are lock-free (a slot is claimed with a CAS and published
// with a release store), so they are async-signal-safe and never block. When the table or the
// data area is full, lookups of uncached functions fail instead of allocating.
#pragma once
#include <cstddef>
#include <cstdint>

namespace whymiss::soft::detail {

// Length of the instruction at p (at most `avail` bytes are read), 0 if undecodable. A 0xCC at
// p that the patched-byte hook (decode.h, set_patched_byte) claims is decoded with the
// program's original byte, so that boundaries cached while breakpoints are in place are right.
uint8_t length_at(const uint8_t* p, size_t avail);
using PatchedByteFn = bool (*)(uint64_t ip, uint8_t* original);
void set_patched_byte_hook(PatchedByteFn f);
// Copies up to 15 bytes of code at p into buf as the program has them (a claimed 0xCC replaced);
// returns buf, or p itself when nothing needed replacing.
const uint8_t* program_bytes(const uint8_t* p, size_t avail, uint8_t* buf);

// mmaps an arena of about `bytes` (replacing a previous one; only when no handler runs).
bool cache_init(size_t bytes);
void cache_reset();

enum class Lookup {
  Found,        // *prev is the start of the instruction that ends at next_ip
  NotBoundary,  // next_ip is not the end of an instruction decoded from the function start
  Full,         // the function is not cached and there is no room to cache it
};
// The function [start, end) of module `module_id` contains next_ip - 1. Decodes and caches the
// function on first use; if another thread is caching it right now, decodes without caching.
Lookup cache_previous(uint64_t start, uint64_t end, uint32_t module_id, uint64_t next_ip,
                      uint64_t* prev, bool* hit);

// Decodes forward from `start` (no cache); same result as cache_previous.
Lookup scan_previous(uint64_t start, uint64_t end, uint64_t next_ip, uint64_t* prev);

// No symbol: guesses the start of the instruction ending at `next` from the bytes [lo, next)
// alone. Decoding starts at each of kHeuristicStarts consecutive offsets kHeuristicWindow bytes
// back (or at lo) and proceeds forward; x86 decoding resynchronises within a few instructions,
// so the chains that land exactly on `next` vote for their last instruction. The winner needs
// kHeuristicMinVotes votes and twice as many as any other candidate; otherwise returns 0 (no
// answer). Chains that fail (undecodable bytes, an instruction straddling `next`) do not vote.
// Returns the offset back from next (1..15) of the winning instruction start. Measured on real
// binaries (bench/soft_decode_bench): ~99.97% right, <0.01% wrong, the rest no answer.
inline constexpr int kHeuristicStarts = 16;
inline constexpr int kHeuristicWindow = 64;
inline constexpr unsigned kHeuristicMinVotes = 3;
unsigned heuristic_previous(const uint8_t* lo, const uint8_t* next);

struct CacheCounters {
  uint64_t functions_cached, full, hits, misses;
};
CacheCounters cache_counters();

}  // namespace whymiss::soft::detail
