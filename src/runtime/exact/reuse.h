// Exact mode's reuse-distance tracker, for miss-ratio curves (profile::ReuseRecord,
// analysis/mrc.h): for each access, how many distinct lines were used since its line was last
// used (its LRU stack distance), kept as histograms for the program at the simulated line size
// and at twice it, and per instruction at the simulated line size.
//
// Cost and bound: an access to the line of the thread's previous access never reaches the
// tracker (the hit path takes it; its distance is 0 and the analysis counts it from the
// totals). Other accesses pay a hash and a compare; followed lines pay a hash-table probe and
// three Fenwick-tree walks. Every line is followed while the program has touched at most
// Knobs::max_lines lines (distances exact); past that, spatial sampling (SHARDS) halves the
// followed share each time the table fills, and each sampled access counts 1/rate. Memory is
// fixed at start (private heap); when it cannot be had, the tracker stays off.
//
// Threading: access() takes a spinlock (the relay makes it uncontended: one thread simulates at a
// time); all threads' accesses form one stream, as a cache they all shared would see them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/profile.h"

namespace whymiss::rt::reuse {

struct Knobs {
  uint32_t max_lines = 1u << 16;     // lines followed per line size before sampling starts
  uint32_t max_instructions = 256;   // instructions with a histogram of their own (first come)
};

// `line_shift`: log2 of the simulated line size. False when memory could not be had.
bool start(unsigned line_shift, const Knobs& k = {});
// One access by instruction `ip` (a return address minus one, as the profile keys them).
void access(uint64_t ip, uint64_t addr) noexcept;
// Records written by export_records: 2 program histograms + instructions.
size_t record_count() noexcept;
// Fills up to `max` records; returns how many. Call once recording stopped.
size_t export_records(profile::ReuseRecord* out, size_t max) noexcept;

}  // namespace whymiss::rt::reuse
