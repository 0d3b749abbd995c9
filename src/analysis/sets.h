// The `sets` view's numbers: how a profile's accesses and misses spread over the sets of each
// cache level, and CCProf's re-conflict distance (RCD) per instruction and per finding.
//
// CCProf (Roy et al., CGO'18, §3.2-3.3): the RCD of a miss is the number of L1 misses between
// it and the previous miss on the same L1 set (per thread here). Misses spread evenly over N
// sets give RCDs around N; a conflict hammers few sets and gives short RCDs. CCProf calls a
// code region conflicted from its contribution factor cf, the share of its L1 misses with an
// RCD shorter than T = 8 (the threshold its evaluation uses, for a 64-set L1); its classifier
// is a logistic regression on cf, of which the paper gives no coefficients, so this file uses a
// fixed cut instead: cf >= 30 % (the paper's loops without conflicts have 10-20 %, the ones with
// conflicts 37-88 %). RCD does not tell miss kinds apart; whymiss's own kinds (from its fully-
// associative shadow) are stated next to it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "model/profile.h"

namespace whymiss::analysis {

inline constexpr uint64_t kRcdShort = 8;          // CCProf's T: an RCD below it is short
inline constexpr double kRcdConflictCut = 0.30;   // cf at or above: CCProf's verdict "conflict"
inline constexpr int kRcdShortBuckets = 4;        // profile::rcd_bucket(d) < 4  <=>  d < 8
static_assert(kRcdShort == uint64_t(1) << (kRcdShortBuckets - 1));

// How a number was obtained, from the profile's mode: exact counts every access, soft replays
// its full-trace windows through the simulator, pmu has sampled misses only.
const char* sets_source(const profile::Profile& p);  // "counted", "estimated", "sampled"

struct SetRow {
  uint32_t set = 0;
  uint64_t accesses = 0;
  uint64_t misses = 0;
  uint64_t by_kind[profile::kKinds] = {};  // [0] hits, then misses by kind
  double share = 0;                        // of the level's misses
};

struct SetBin {  // contiguous sets [first, last]
  uint32_t first = 0, last = 0;
  uint64_t accesses = 0, misses = 0;
};

struct SetLevel {
  int level = 0;
  std::string name;
  uint64_t sets = 0;          // in the geometry
  uint64_t rows = 0;          // sets as counted (folded to kMaxSetRecords)
  bool folded = false;        // sets > profile::kMaxSetRecords: set = index mod that
  uint64_t accesses = 0, misses = 0;
  uint64_t sets_with_misses = 0;
  double hottest_eighth_share = 0;  // misses on the 1/8 of sets with most misses (even: 12.5 %)
  std::vector<SetRow> hot;          // hot sets (kHotFactor, kHotMin), most misses first
  std::vector<SetBin> bins;         // at most kMaxBins, in set order
};

struct Rcd {
  uint64_t first = 0;   // misses that were their thread's first on the set (no distance)
  uint64_t pairs = 0;   // misses with a distance
  uint64_t short_ = 0;  // of which the distance was < kRcdShort
  uint64_t buckets[profile::kRcdBuckets] = {};
  double cf() const { return pairs ? double(short_) / double(pairs) : 0; }
  bool conflict() const { return pairs > 0 && cf() >= kRcdConflictCut; }
  // The bucket holding the median distance (-1 when there are none).
  int median_bucket() const;
  void add(const profile::RcdRecord& r);
};

struct RcdInstr {
  uint64_t ip = 0;
  Rcd rcd;
  uint64_t l1_misses = 0;                       // profile::InstructionRecord, by kind below
  uint64_t by_kind[profile::kKinds] = {};       // its L1 misses by whymiss's kind
};

struct RcdFinding {
  size_t finding = 0;  // index into Analysis::findings
  Rcd rcd;             // over the finding's instructions
};

struct SetsView {
  std::string source;  // sets_source()
  uint32_t l1_sets = 0;  // the set count the distances were taken with
  std::vector<SetLevel> levels;
  std::vector<RcdInstr> instructions;  // most distances first, at most kMaxInstructions
  std::vector<RcdFinding> findings;    // findings whose instructions have distances
  bool has_set_counts() const { return !levels.empty(); }
};

// A hot set has kHotFactor x the mean misses of the level's sets, and at least kHotMin (fewer
// say nothing about a layout).
inline constexpr double kHotFactor = 4;
inline constexpr uint64_t kHotMin = 16;
inline constexpr size_t kMaxHot = 8, kMaxBins = 64, kMaxInstructions = 10;

SetsView analyze_sets(const profile::Profile& p, const Analysis& a);

}  // namespace whymiss::analysis
