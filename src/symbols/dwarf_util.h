// Internal to src/symbols: the few DWARF walks the symbolizer needs, on top of libdw.
#pragma once
#include <elfutils/libdwfl.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "symbols/string_pool.h"

namespace whymiss::symbols::internal {

// Finds and names the functions containing an address. Indexes each CU's functions by address
// on first use and caches names, so one instance serves one Dwfl session (its DIEs must live).
class FunctionFinder {
 public:
  explicit FunctionFinder(StringPool* pool) : pool_(pool) {}

  // The function scopes (DW_TAG_subprogram / DW_TAG_inlined_subroutine) that physically
  // contain `pc` (a DWARF address, bias removed), innermost first: an inlined call's DIE is
  // nested in its caller's, so this is the inline call chain up to the out-of-line function.
  std::vector<Dwarf_Die> scopes(Dwarf_Die* cu, Dwarf_Addr pc);

  // Demangled linkage name if there is one (full C++ signature), else DW_AT_name (scope-
  // qualified in C++ CUs); follows DW_AT_abstract_origin / DW_AT_specification. "" if unnamed.
  std::string_view name(Dwarf_Die* die, Dwarf_Die* cu);

 private:
  struct Range {
    Dwarf_Addr lo = 0;
    Dwarf_Addr hi = 0;
    Dwarf_Die die;
  };
  const std::vector<Range>& index(Dwarf_Die* cu);

  StringPool* pool_;
  // Keyed by Dwarf_Die::addr, unique across all modules of the session.
  std::unordered_map<const void*, std::vector<Range>> cu_index_;  // sorted by lo
  std::unordered_map<const void*, std::string_view> names_;
};

// Finds the compilation unit containing an address. libdwfl's own lookup
// (dwfl_module_addrdie / dwfl_module_getsrc) reads only .debug_aranges in elfutils < 0.192,
// and Clang does not emit that section by default, so for Clang-built code (DWARF 4 or 5)
// libdwfl finds no CU at all. When it fails, this falls back to an index of every CU's own
// ranges (DW_AT_low_pc/high_pc or DW_AT_ranges, any form), built once per module on demand.
class CuFinder {
 public:
  // The CU DIE (owned by libdwfl, valid for the session) covering run-time address `ip` in
  // `mod`, with *bias set to the module's DWARF bias; null if no CU covers it.
  Dwarf_Die* find(Dwfl_Module* mod, Dwarf_Addr ip, Dwarf_Addr* bias);

 private:
  struct Range {
    Dwarf_Addr lo = 0;  // DWARF addresses, bias removed
    Dwarf_Addr hi = 0;
    Dwarf_Die* cu = nullptr;
  };
  struct ModuleIndex {
    Dwarf_Addr bias = 0;
    std::vector<Range> ranges;    // sorted by lo
    std::vector<Dwarf_Addr> reach;  // reach[i] = max hi over ranges[0..i]
  };
  const ModuleIndex& index(Dwfl_Module* mod);

  std::unordered_map<const Dwfl_Module*, ModuleIndex> modules_;
};

// DW_AT_artificial on the DIE or its abstract origin (an inlined __attribute__((artificial))).
bool is_artificial(Dwarf_Die* die);

// Where the inlined call `inl` was made from: DW_AT_call_file (index into the CU's file table
// `files`, may be null) and DW_AT_call_line. Null / 0 for what is missing; the file name is
// libdw's and lives as long as the Dwfl session.
void call_site(Dwarf_Die* inl, Dwarf_Files* files, size_t nfiles, const char** file,
               uint32_t* line);

// C-like spelling of a type DIE: "struct counters", "long int[4]", "const char *".
std::string type_name(Dwarf_Die* type);

// Every variable with a static address in `mod` (CU scope, namespaces, function-local statics),
// keyed by run-time address, mapped to its type name. Walks all CUs once: call lazily.
void collect_variable_types(Dwfl_Module* mod, std::unordered_map<uint64_t, std::string>* out);

}  // namespace whymiss::symbols::internal
