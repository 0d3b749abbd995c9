// Miss-ratio curves from exact mode's reuse-distance histograms (profile::ReuseRecord): the miss
// ratio a fully-associative LRU cache of each size would have had on the run's accesses, for the
// program (at the simulated line size, twice it and half it) and for groups of instructions. One run
// answers "what if the cache were smaller or larger" without re-running (StatCache's question,
// answered here from exact distances).
//
// A size of C lines misses every access whose distance is C or more, and every first access.
// Accesses to the line of the thread's previous access never reached the tracker: they are
// distance-0 hits, counted from the totals. Sizes that are powers of two (in lines) fall on
// bucket boundaries and are exact (for a sampled histogram, as exact as the sample); others are
// interpolated inside their bucket.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/profile.h"

namespace whymiss::analysis {

struct MrcPoint {
  uint64_t size = 0;  // bytes
  double miss_ratio = 0;
};

struct Mrc {
  uint32_t line = 0;  // bytes
  double rate = 1;    // share of lines followed (1: every line, distances counted exactly)
  // Accesses the tracker could not follow (profile::ReuseInfoRecord; 0 when the profile does not
  // say): they count as hits, so the curve is a lower bound, "partial".
  uint64_t dropped = 0;
  // "counted" (every line, nothing dropped), "sampled (R % of lines followed)", or
  // "partial (N accesses not followed, counted as hits)"; sampled and partial may come together.
  std::string how;
  std::vector<MrcPoint> points;
};

// The sizes a curve is given at: 1 KiB .. 1 GiB by powers of two, plus each cache level's size,
// half and double (sorted, distinct).
std::vector<uint64_t> mrc_sizes(const profile::Profile& p);

// The program's curve at `line_bytes` (0: the simulated line size); nullopt when the profile has
// no histogram for it (older profiles, sampled modes, WHYMISS_MRC=0, WHYMISS_MRC_HALF=0).
std::optional<Mrc> program_mrc(const profile::Profile& p, uint32_t line_bytes = 0);
// The curve of these instructions together (their accesses from the instruction records);
// nullopt unless every one of them has a histogram (the tracker keeps a bounded number).
std::optional<Mrc> instructions_mrc(const profile::Profile& p, const std::vector<uint64_t>& ips);

// The line sizes the program has curves for other than the simulated one, in the order the
// report lists them (twice it, then half it).
std::vector<uint32_t> other_mrc_lines(const profile::Profile& p);

// The miss ratio at `size_bytes` of a histogram whose accesses number `accesses` in all.
double miss_ratio_at(const profile::ReuseRecord& r, uint64_t accesses, uint64_t size_bytes);

}  // namespace whymiss::analysis
