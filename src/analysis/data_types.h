// Misses by data type and field (DProf's data profile): each instruction's misses are placed on
// the data its sampled miss addresses (InstructionRecord::sample_addrs, up to kRefs of its
// non-compulsory misses) fall in, split evenly across those addresses: the heap object or global
// containing the address, its type from the TypeOracle, the field from the offset. The counts
// are the profile's (counted in exact mode, estimated from samples otherwise); the split by
// address is modelled from at most kRefs addresses per instruction. Misses of instructions
// without a sampled address (compulsory misses only) stay unplaced, and data of no known type
// is "unknown", never guessed. False-sharing field pairs come from the granule masks of lines
// with false-sharing misses (LineRecord).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/predict.h"
#include "analysis/types.h"
#include "model/profile.h"

namespace whymiss::analysis {

// Where an address lives: a heap object or a global, with its type when the oracle knows it.
struct Place {
  bool found = false;           // inside a recorded heap object or a global
  bool heap = false;
  uint64_t serial = 0;          // heap objects
  uint64_t start = 0;           // of the object or global
  const DataType* type = nullptr;
  const Field* field = nullptr; // field_at(type, addr - start)
};

class DataIndex {
 public:
  DataIndex(const profile::Profile& p, TypeOracle& types);
  // `prefer`: serials of heap objects the accessing instruction is known to have touched; an
  // address inside several recorded objects (freed and reused memory) goes to one of those.
  Place at(uint64_t addr, const uint64_t* prefer = nullptr, int n = 0);
  // The type of p.objects[i] (asked of the oracle once).
  const DataType* heap_type(size_t i);

 private:
  const profile::Profile& p_;
  TypeOracle& types_;
  std::vector<uint32_t> by_start_;   // indexes of p.objects, by start
  std::vector<uint64_t> reach_;      // max end over by_start_[0..i]
  std::vector<const DataType*> heap_types_;  // per p.objects index, filled lazily
  std::vector<uint8_t> heap_asked_;
};

struct FieldMisses {
  std::string name;  // the field; "(padding)" between fields; the type's name for a scalar
  uint64_t offset = 0, size = 0;
  double misses[profile::kLevels][profile::kKinds] = {};  // kind 0 (hits) unused
};

struct FalsePair {
  std::string a, b;  // fields in different bytes of one line, one written by a thread and the
                     // other used by another thread; a is this type's, b "type.field" when it
                     // is another type's (same type: a <= b by name)
  double misses = 0; // L1 false-sharing misses of the lines where they met, split between pairs
  uint32_t lines = 0;
};

struct TypeMisses {
  std::string name;  // "unknown": data of no known type (untyped heap objects, stack, ...)
  uint64_t size = 0; // 0 when unknown
  bool known = false;
  const DataType* type = nullptr;  // the oracle's, for the layout; null when unknown
  // Heap objects of this type the profile recorded (those with misses), and globals the
  // placed misses fell in.
  uint32_t heap_objects = 0, globals = 0;
  double misses[profile::kLevels][profile::kKinds] = {};
  std::vector<FieldMisses> fields;    // most misses (all levels) first; empty when unknown
  std::vector<FalsePair> false_pairs; // most misses first
  double total(int level) const;      // all miss kinds at `level`
};

struct DataTypes {
  int levels = 0;
  std::vector<TypeMisses> types;  // most L1 misses first; "unknown" among them by its count
  double program[profile::kLevels] = {};   // all misses of the program, by level
  double unplaced[profile::kLevels] = {};  // misses of instructions without a sampled address
};

DataTypes data_types(const profile::Profile& p, TypeOracle& types);

// Fills each finding's data_type / data_field where its data has a known type, and data_how:
// sharing findings by the line's written (then used) granules, first; else the heap object or
// global, and field, that most of its instructions' sampled miss addresses fall in.
void name_finding_types(Analysis& a, const profile::Profile& p, TypeOracle& types);

// Fills each latent false-sharing case's type and per-thread fields where the oracle knows the
// heap object's type: the members each thread's bytes (LatentFalseSharing::spans, offsets from
// the object's start at today's placement, taken modulo the type's size for an array of it)
// cover. Unknown types leave both empty.
void name_latent_fields(Predictions& pr, const profile::Profile& p, TypeOracle& types);

}  // namespace whymiss::analysis
