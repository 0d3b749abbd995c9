// Post-mortem symbolisation: instruction addresses → inline chains of {function, file, line},
// data addresses → global/static variables. Runs at report time, outside the profiled program,
// from the module list the runtime recorded (path, load bias, mapped range). Backed by libdw.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"

namespace whymiss::symbols {

// The views point into strings owned by the Symbolizer and stay valid as long as it lives.
struct SourceFrame {
  std::string_view function;  // demangled; "??" when unknown
  std::string_view file;      // DWARF file name as recorded (usually absolute); "" when unknown
  uint32_t line = 0;          // 0 when unknown
};

struct GlobalVar {
  std::string name;    // demangled symbol name (GCC function-local statics look like "n.0")
  std::string type;    // DWARF type, e.g. "struct counters", "long int[4]"; "" when unknown
  uint64_t start = 0;  // run-time address (load bias applied)
  uint64_t size = 0;   // bytes, > 0
  std::string module;  // ModuleSpec::path of the defining module
};

struct ModuleSpec {
  std::string path;        // file to read symbols from
  uint64_t load_bias = 0;  // dl_iterate_phdr's dlpi_addr; 0 for a non-PIE executable
  uint64_t start = 0;      // mapped run-time range [start, end); both 0 = take it from the ELF
  uint64_t end = 0;
};

// One session per report. Not thread-safe. The vector returned by resolve() and the pointer
// returned by global_at() stay valid until the next add_module() (which may change earlier
// answers); SourceFrame's strings stay valid for the Symbolizer's lifetime.
class Symbolizer {
 public:
  static std::unique_ptr<Symbolizer> create();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // A module that cannot be read is remembered (module_of() still names it, its addresses
  // resolve to "??") and the error is a one-sentence warning, not a reason to stop.
  // Separate debug info is found via build-id / .gnu_debuglink in the standard places.
  Status add_module(const ModuleSpec& m);

  // Inline chain for `ip`: innermost (possibly inlined) function first, then its callers up to
  // the out-of-line function; each frame's file:line is the position inside that function.
  // Never empty (unknown → one {"??", "", 0} frame). Falls back to the ELF symbol table when
  // there is no DWARF. The address is resolved as given: callers holding a *return address*
  // must pass `ret_addr - 1` so the call instruction, not the one after it, is resolved.
  // Cached per ip: ~10 µs the first time (more for the first ip of a compilation unit), a hash
  // lookup afterwards.
  const std::vector<SourceFrame>& resolve(uint64_t ip);

  // The global/static variable (ELF STT_OBJECT, size > 0, TLS excluded) whose
  // [start, start + size) contains `addr`, innermost if they nest; nullptr if none.
  const GlobalVar* global_at(uint64_t addr);

  // Path of the module whose range contains `ip` (readable or not); "" if none.
  std::string module_of(uint64_t ip) const;

 private:
  struct Impl;
  explicit Symbolizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// abi::__cxa_demangle for "_Z…" names; any other name, or one that fails to demangle, unchanged.
std::string demangle(const char* name);

}  // namespace whymiss::symbols
