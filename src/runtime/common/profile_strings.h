// Building the Strings and Modules sections of a profile at the end of a run, without the
// program's heap: a string table and a module list in caller-provided (private-heap) arrays.
// Used by both runtimes (exact and soft).
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/profile.h"

namespace whymiss::rt {

struct StringTable {
  char* data = nullptr;
  size_t len = 0, cap = 0;
  // Appends s (NUL-terminated); returns its offset, or profile::kNoString when full.
  uint32_t add(const char* s);
};

// Appends a ModuleRecord for every loaded object with a path (the main program under its
// /proc/self/exe path; the vDSO and other unnamed objects are skipped). Returns the count.
size_t list_modules(profile::ModuleRecord* out, size_t max, StringTable& strings);

}  // namespace whymiss::rt
