// Why a core no longer holds a line it held, kept from the removal until the core refills the
// line: the evidence behind coherence misses and inclusion-victim misses.
//
// DepartureTable is a flat open-addressing map (linear probing, backward-shift deletion) keyed
// by (line, core). It replaces a std::unordered_map that allocated a node on every coherence or
// inclusion removal and freed it on the refill; this one allocates only when it grows. Not
// thread-safe: each core has one per stripe (the shards of hierarchy.cpp), made on first use and
// used under that stripe's lock, also by other cores' snoops and back-invalidations.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/sim.h"

namespace whymiss::sim {

struct Departure {
  uint64_t writer_mask = 0;  // granules of the invalidating write (coherence)
  uint64_t my_mask = 0;      // granules this core touched during its tenure
  uint32_t writer_core = 0;
  uint8_t coherence_levels = 0;  // bit l: removed from private level l by another core's write
  uint8_t inclusion_levels = 0;  // bit l: removed from level l because a farther level evicted it
  // Kind of the eviction behind an inclusion removal, fixed when it happened: Conflict if a
  // fully-associative cache of the evicting level's size still held the line then.
  Outcome inclusion_kind = Outcome::Capacity;
};

class DepartureTable {
 public:
  DepartureTable() : slots_(16) {}
  bool empty() const { return used_ == 0; }
  // The departure of (line, core), or nullptr. The pointer is valid until the next set/erase.
  const Departure* find(uint64_t line, uint32_t core) const {
    const uint64_t h = hash(line, core);
    if (present_[bucket(h)] == 0) return nullptr;  // the usual answer, without a probe
    for (size_t i = home_of(h);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.line == kEmpty) return nullptr;
      if (s.line == line && s.core == core) return &s.d;
    }
  }
  // Inserts or overwrites.
  void set(uint64_t line, uint32_t core, const Departure& d);
  // Empties the table, keeping its memory (no allocation).
  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    std::fill(present_.begin(), present_.end(), 0u);
    used_ = 0;
  }
  void erase(uint64_t line, uint32_t core);

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // never a line address (addr >> line_shift < 2^64-1)
  struct Slot {
    uint64_t line = kEmpty;
    uint32_t core = 0;
    Departure d;
  };
  size_t mask() const { return slots_.size() - 1; }
  static uint64_t hash(uint64_t line, uint32_t core) {
    return (line ^ (uint64_t(core) << 47)) * 0x9E3779B97F4A7C15ull;
  }
  size_t home_of(uint64_t h) const { return size_t(h >> 32) & mask(); }
  size_t home(uint64_t line, uint32_t core) const { return home_of(hash(line, core)); }
  static size_t bucket(uint64_t h) { return size_t(h >> 22) & (kBuckets - 1); }
  void grow();

  std::vector<Slot> slots_;  // power-of-two size, load factor <= 1/2
  size_t used_ = 0;
  // How many entries hash to each bucket: most misses find their bucket empty and skip the
  // probe, which would otherwise be a host cache miss in a table that held many entries once.
  static constexpr size_t kBuckets = 1024;
  std::vector<uint32_t> present_ = std::vector<uint32_t>(kBuckets, 0);
};

}  // namespace whymiss::sim
