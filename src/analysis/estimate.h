// From the raw facts of a sampling collector (soft, pmu) to the per-instruction / per-line /
// per-object records that analyze() reads, so that one analysis serves every mode.
//
// What each estimated number is (the report says so next to it):
//  - accesses of an instruction = its samples (sampled; unit: samples, not executions);
//  - pmu: misses by level = samples whose data source lies beyond that level (sampled);
//  - soft: misses = samples x the instruction's miss ratio per level, modelled by replaying its
//    captured windows through the simulator (conflict and short-reuse capacity) and, for lines
//    a window sees first, by the reuse distance its samples imply (a sweep that comes back to
//    the start of an object after D bytes misses in every level smaller than D);
//  - kinds: replay outcome (windows), Algorithm 1 of CachePerf (set concentration vs footprint)
//    where only samples exist, sharing from cross-thread captures/samples with word masks.
// Single-threaded by contract.
#pragma once
#include <cstdint>

#include "model/profile.h"
#include "model/result.h"

namespace whymiss::analysis {

struct EstimateKnobs {
  uint32_t min_samples_per_instruction = 8;  // fewer: the instruction is not estimated
  double set_concentration = 0.5;  // >= this share of misses in <= ways*2 sets: conflict
  uint32_t min_threads_for_sharing = 2;
};

// Fills p.instructions, p.lines, p.objects' miss fields and p.counters from p.samples,
// p.windows and p.captures. Exact-mode profiles are returned unchanged. Errors (one sentence)
// when the sampled data is inconsistent (e.g. captures out of time order).
Status estimate(profile::Profile& p, const EstimateKnobs& k = {});

// How many samples / windows / captures back a record, for "confidence" in the report.
struct Support {
  uint64_t samples = 0, windows = 0, captures = 0;
};

}  // namespace whymiss::analysis
