// Exact mode's spatial-use tracker for `report --view fields` (profile::ObjectUseRecord, #17):
// for every line L1 evicts to make room (sim::LineResult::l1_victim), the heap object holding it
// is credited with the line and with the bytes of it the program touched during the line's L1
// tenure, per phase (offset from the object's start modulo 64). The runtime core calls
// spatial::evicted() for each object a victim overlaps (up to 4); the table (private heap,
// kUseObjects objects, open addressing by serial) is fixed at start, objects it has no room for
// are dropped and counted. Lines in no live object are counted only.
//
// Recorded for lines of at most 64 bytes (one granule a byte). On by default; WHYMISS_SPATIAL=0
// turns it off.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/profile.h"
#include "runtime/common/heap.h"

namespace whymiss::rt::spatial {

inline constexpr uint32_t kUseObjects = 2048;  // ~2.7 MiB (1,344 bytes a slot)

// Reads the environment and reserves the table.
void start(unsigned line_shift) noexcept;
bool on() noexcept;

// L1 evicted `line`, which overlaps object `o` (a copy will do), and its tenure touched the
// granules in `mask`. `serialised`: no other thread calls in meanwhile (no lock); otherwise
// the update holds the object's slot lock (a leaf lock: nothing is called under it).
void evicted(const HeapObject& o, uint64_t line, uint64_t mask, bool serialised) noexcept;
// One L1 eviction seen (call once per evicted line, whether or not it overlaps objects);
// `serialised` as for evicted().
void seen(bool serialised) noexcept;
// L1 evicted a line in no live heap object (after seen()).
void outside(bool serialised) noexcept;
// What threads simulating at once counted on their own instead of seen(false) and
// outside(false) each (a locked add on a line every thread writes), added at the end.
void add(uint64_t seen, uint64_t outside) noexcept;

// Records for the profile, once recording stopped; arrays from the caller (private heap).
size_t count() noexcept;
size_t export_records(profile::ObjectUseRecord* out, size_t max) noexcept;
profile::ObjectUseInfoRecord info() noexcept;

}  // namespace whymiss::rt::spatial
