// Working set by type over time (DProf's working-set view, #17 `report --view working-set`):
// how many lines of each type (or allocation site) were resident at each cache level, at
// intervals through the run.
//
// Exact mode: counted from the simulator's tags at each sample (profile::WorkingSetRecord;
// private levels summed over the simulated cores; a level of more than 65,536 lines from a
// sample of its sets, estimated). Soft mode: estimated by analysis::estimate() from its trace
// windows, one sample per replay group (an epoch's windows): the lines that replay left in the
// simulated caches, i.e. the footprint of the traced windows, a lower bound of the working set
// at that time (the windows hold some 10^4 accesses per thread). Pmu profiles have neither and
// report the view unavailable rather than guess.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/types.h"
#include "model/profile.h"

namespace whymiss::analysis {

struct WsSample {
  uint64_t time_ns = 0;    // since the run's start
  uint64_t l1_misses = 0;  // of the program so far
};

struct WsGroup {
  std::string type;                  // "" when unknown: one allocation site, or non-heap data
  bool heap = true;                  // false: lines in no heap object (globals, stacks, ...)
  uint32_t site = profile::kNoSite;  // the (first) site
  std::vector<uint32_t> sites;
  // lines[sample][level]
  std::vector<std::array<uint64_t, profile::kLevels>> lines;
  std::array<uint64_t, profile::kLevels> peak{};  // the most at any sample, per level
};

struct WorkingSet {
  bool available = false;
  std::string unavailable;  // one sentence when !available
  uint64_t period = 0;      // L1 misses between samples
  uint64_t dropped_lines = 0;
  std::vector<WsSample> samples;
  // Lines each level holds (per core for private levels): a group's count at a private level
  // can exceed it only by copies in several cores.
  std::array<uint64_t, profile::kLevels> capacity_lines{};
  // Per level: 1 = counted in every set; k > 1 = counted in every k-th set and scaled by k
  // (estimated; the runtime bounds a walk's cost that way for big caches).
  std::array<uint32_t, profile::kLevels> set_step{};
  bool estimated = false;  // some level has set_step > 1, or replayed
  // Soft mode: samples are trace epochs' replays (times from the first traced window; L1
  // misses as the replay counted them, in traced accesses).
  bool replayed = false;
  std::vector<WsGroup> groups;  // most lines at the last level's peak first
};

WorkingSet working_set(const profile::Profile& p, TypeOracle& types);

}  // namespace whymiss::analysis
