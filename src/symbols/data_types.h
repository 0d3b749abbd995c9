// The program's data types from its DWARF: the layout of the type a heap allocation's result is
// stored to, and of each global. Report-time only, like the Symbolizer (a libdw session of its
// own over the same modules). Answers are "unknown" (nullptr) whenever the debug information
// does not say one thing: a reader never guesses.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "symbols/symbolizer.h"

namespace whymiss::symbols {

// A leaf member, flattened: nested structs "outer.inner", arrays "name[]" (one member for the
// whole array), a union's members joined "x|y" (one member for the union).
struct TypeMember {
  std::string name;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct TypeLayout {
  std::string name;  // "struct worker", "double"
  uint64_t size = 0;
  std::vector<TypeMember> members;  // by offset, non-overlapping; empty for a scalar
};

class TypeReader {
 public:
  static std::unique_ptr<TypeReader> create(const std::vector<ModuleSpec>& modules);
  ~TypeReader();
  TypeReader(const TypeReader&) = delete;
  TypeReader& operator=(const TypeReader&) = delete;

  // The type an allocation returns, from the call whose return address is `ret_addr` (an
  // allocation site's innermost frame in the program): the pointee of a pointer variable
  // declared on the call's source line in a scope containing the call, or of a variable held in
  // the return register (rax) right after the call. Null when there is no such variable, when
  // candidates disagree, when the pointee is void or larger than `object_size`.
  const TypeLayout* allocated_type(uint64_t ret_addr, uint64_t object_size);

  // The global or static variable containing `addr`: its type with arrays stripped to their
  // element (an array global is an array of that type) and its start. Null if none is known.
  const TypeLayout* global_type(uint64_t addr, uint64_t* start);

 private:
  struct Impl;
  explicit TypeReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace whymiss::symbols
