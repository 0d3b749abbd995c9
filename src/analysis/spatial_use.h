// Spatial use by data type (#17, the `fields` view): of the bytes of heap objects' lines that L1
// fetched and later evicted to make room, the share the program touched while L1 held them, per
// type and, where the type's size divides 64 (every byte phase of ObjectUseRecord is then one
// byte of one field), per field. Fields fetched in a type's lines but touched in almost none of
// them while other fields of the same lines were touched are the cold fields riding along: the
// evidence for splitting or reordering a struct. Counted, exact mode only (the runtime sees every
// access); soft and pmu profiles have no such records.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/types.h"
#include "model/profile.h"

namespace whymiss::analysis {

// A field "rides along" when its bytes were touched in less than this share of the fetched
// lines holding them, while the type's lines had other bytes touched.
inline constexpr double kRidingShare = 0.02;

struct FieldUse {
  std::string name;        // "(padding)" for bytes between fields
  uint64_t offset = 0, size = 0;
  uint64_t fetched = 0;    // field bytes in evicted lines (a byte counted once per line)
  uint64_t touched = 0;    // of those, touched during the line's tenure
  double use = 0;          // touched / fetched (0 when nothing was fetched)
  bool riding = false;     // fetched, touched in < kRidingShare of it, others touched
};

struct TypeUse {
  std::string name;
  uint64_t size = 0;
  const DataType* type = nullptr;
  uint32_t objects = 0;            // heap objects with evicted lines
  uint64_t lines = 0;              // their evicted lines
  uint64_t fetched = 0, touched = 0;  // bytes inside the objects
  double use = 0;                  // touched / fetched
  bool per_field = false;          // size divides 64 and the layout is known
  std::vector<FieldUse> fields;    // offset order, when per_field
};

struct SpatialUse {
  bool available = false;
  std::string reason;        // why not, when !available
  uint32_t line_bytes = 0;
  uint64_t evicted_lines = 0, outside_lines = 0, dropped_lines = 0;
  uint64_t untyped_lines = 0;  // evicted lines of heap objects of no known type
  std::vector<TypeUse> types;  // most evicted lines first
};

SpatialUse spatial_use(const profile::Profile& p, TypeOracle& types);

// The type named `name` in `s`, or nullptr.
const TypeUse* find_type_use(const SpatialUse& s, const std::string& name);

}  // namespace whymiss::analysis
