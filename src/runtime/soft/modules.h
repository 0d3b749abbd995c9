// Function-start tables of the loaded modules, for the soft collector's decoder.
//
// Built outside signal handlers (init / refresh after dlopen) from each module's .symtab (else
// .dynsym), read from the file with mmap and <elf.h>. Lookups are lock-free binary searches over
// an immutable table published through an atomic pointer, so they are async-signal-safe. A
// refresh publishes a new table and never unmaps the old one (a handler may still be reading it).
#pragma once
#include <cstddef>
#include <cstdint>

namespace whymiss::soft::detail {

// One executable PT_LOAD segment of a module: code bytes in [lo, hi) are mapped and readable.
struct CodeSegment {
  uint64_t lo = 0, hi = 0;
  uint32_t module = 0;  // index into ModuleTable::modules
};

struct FunctionRange {
  uint64_t start = 0, end = 0;  // runtime addresses; end is exclusive
};

struct Module {
  uint64_t base = 0;  // dlpi_addr
  uint32_t id = 0;    // unique per loaded image for the life of the process (cache keys)
  uint32_t function_count = 0;
  const FunctionRange* functions = nullptr;  // sorted by start, distinct starts
  char path[256] = {};
};

struct ModuleTable {
  const CodeSegment* segments = nullptr;  // sorted by lo, non-overlapping
  uint32_t segment_count = 0;
  const Module* modules = nullptr;
  uint32_t module_count = 0;
};

// Rebuilds the table from dl_iterate_phdr, reusing the function arrays of modules already
// known (same base and path). Not async-signal-safe. Returns false if no memory could be mapped.
bool load_modules();
// Forgets the current table (tests re-initialise; only when no handler can be running).
void reset_modules();
// The current table, or nullptr before load_modules(). Async-signal-safe.
const ModuleTable* current_modules();

// The code segment containing ip, or nullptr. Async-signal-safe.
const CodeSegment* find_segment(const ModuleTable& t, uint64_t ip);
// The function of `m` containing ip, clamped to `seg`; false if no symbol covers ip.
bool find_function(const Module& m, const CodeSegment& seg, uint64_t ip, FunctionRange* out);

// Code no breakpoint (0xCC) may ever go into. The kernel kills a thread that traps with SIGTRAP
// blocked (force_sig resets the handler to SIG_DFL): libc and the dynamic loader run with every
// signal blocked at times (pthread_create, fork, posix_spawn internals), and the runtime's own
// handlers run with SIGTRAP blocked or would trap inside themselves. True for ips in no known
// module, in libc, libpthread, the dynamic loader, the vDSO, the runtime's libraries (libwhymiss*,
// Zydis, libstdc++, libgcc_s) and in the module holding `own_ip` (the caller's code) unless that
// is the main program (tests link the runtime statically). Async-signal-safe.
bool breakpoint_forbidden(uint64_t ip, uint64_t own_ip);

// Exposed for tests: parses the function symbols of an ELF image held in memory. Writes up to
// `cap` ranges (st_value + bias, end from st_size) into out, sorted and deduplicated, and
// returns how many there are (which may exceed cap: call again with more room). Zero-sized
// symbols end at the next symbol's start or at `limit`.
size_t parse_function_symbols(const uint8_t* image, size_t size, uint64_t bias, uint64_t limit,
                              FunctionRange* out, size_t cap);

}  // namespace whymiss::soft::detail
