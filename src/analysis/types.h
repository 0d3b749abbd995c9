// What the program's data is, by its debug information: the type of a heap object's elements
// and of a global, and the field at an offset. Analysis and report ask a TypeOracle; the one
// that reads DWARF lives outside the analysis (cli, over symbols/), so that analysis stays free
// of ELF and DWARF and tests can hand in types of their own. Unknown stays unknown (nullptr):
// an oracle never guesses.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/profile.h"

namespace whymiss::analysis {

// A leaf member of a type, flattened: nested structs give "outer.inner", array members
// "name[]" (one Field for the whole array; the element is not split further).
struct Field {
  std::string name;
  uint64_t offset = 0;  // from the start of the type
  uint64_t size = 0;    // bytes, > 0
};

struct DataType {
  std::string name;            // as the program spells it: "struct node", "Matrix", "double"
  uint64_t size = 0;           // sizeof, > 0
  std::vector<Field> fields;   // by offset; empty for a scalar or an unknown layout
};

class TypeOracle {
 public:
  virtual ~TypeOracle() = default;
  // The element type of a heap object (an object of n * size bytes is an array of n), or
  // nullptr when the debug information does not say.
  virtual const DataType* heap_type(const profile::Profile& p, const profile::ObjectRecord& o) = 0;
  // The type of the global or static variable containing `addr`, and its start; nullptr if none
  // or unknown.
  virtual const DataType* global_type(uint64_t addr, uint64_t* start) = 0;
};

// Knows no types: every answer is unknown.
class NoTypes : public TypeOracle {
 public:
  const DataType* heap_type(const profile::Profile&, const profile::ObjectRecord&) override { return nullptr; }
  const DataType* global_type(uint64_t, uint64_t*) override { return nullptr; }
};

// The field of `t` holding byte `offset` of an object of t (or of an array of t: the offset is
// taken modulo t.size); nullptr in padding, or when t has no fields.
const Field* field_at(const DataType& t, uint64_t offset);

}  // namespace whymiss::analysis
