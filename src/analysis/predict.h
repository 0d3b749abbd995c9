// What-if predictions from exact mode's access log (profile::AccessLogRecord): the run's accesses
// replayed through a fresh simulator of the same geometry, with a change applied to addresses.
//
// 1. Each finding's fix (predicted_fix): false or true sharing -> each thread's accesses to the
//    finding's lines go to a private copy of those lines (padding, or a thread-local sum);
//    conflict from one object's own stride -> its rows padded by one line; conflict among objects
//    the allocator placed at the same set offset -> their starts staggered across the sets;
//    capacity -> no replay: the miss-ratio curve (analysis/mrc.h) gives the cache size at which
//    the finding's instructions miss no more than their first touches (modelled).
// 2. Latent false sharing (Predator): for each heap object written by one thread and used by
//    another, the object's own accesses replayed with the object shifted by every 8-byte offset
//    8..56, and with 128-byte lines (at both 128-byte alignments of today's placement); a
//    placement whose false-sharing misses rise well above today's is reported.
//
// Limits, stated in the report: a replay uses the threads' recorded interleaving (a different
// placement could change the timing, hence the interleaving, of a real run); when the log was
// full, the replay covers the run's first accesses and its counts are scaled to the whole run;
// the log keeps thread indices mod 128. Latent false sharing replays the object's accesses alone
// (evictions by other data are not modelled) and looks only at the profile's heap objects (those
// with misses beyond first touches).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/analysis.h"
#include "model/profile.h"

namespace whymiss::analysis {

struct PredictedFix {
  bool available = false;
  std::string what;        // the fix, in words
  std::string how;         // "replayed" / "replayed (first N % of accesses, scaled)" / "modelled ..."
  bool replayed = false;   // false: modelled from the miss-ratio curve
  int level = 0;           // the level the counts are of (replays: L1; capacity: the finding's)
  // Replays: the program's L1 misses (all kinds). Capacity: the finding's instructions' misses
  // in a fully-associative LRU cache of the level's size and of cache_size.
  uint64_t misses_before = 0, misses_after = 0;
  uint64_t kind_before = 0, kind_after = 0;      // misses of the finding's kind
  uint64_t cache_size = 0;                       // capacity: the size that removes them (bytes)
  std::string why_not;     // when !available: why there is no prediction
};

struct LatentFalseSharing {
  uint64_t serial = 0, start = 0, size = 0;
  uint32_t site = profile::kNoSite;
  uint32_t alloc_thread = 0;
  std::string trigger;    // "offset N" or "line 128"
  uint32_t offset = 0;    // bytes the object was moved by (line 128: 0 or 64)
  uint32_t line = 64;     // line size of the replay
  uint64_t predicted_misses = 0;  // L1 false-sharing misses on the object at that placement
  uint64_t today_misses = 0;      // the same replay at today's placement and line size
  std::vector<uint32_t> threads;
  std::vector<std::string> bytes;  // per thread (same order): "writes 40-47, reads 0-7"
  // Per thread (same order): the runs of the object's bytes it read or wrote, [begin, end) from
  // the object's start at today's placement (its first 64 KiB). For naming the fields.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> spans;
  // From the debug information, by name_latent_fields() (analysis/data_types.h); left empty when
  // it does not know the object's type (never guessed). `fields`: per thread (same order), the
  // members its spans cover, by offset ("(padding)" for bytes between members); empty when the
  // type is unknown or has no members (a scalar); a thread's list is empty when it used only
  // bytes past the first 64 KiB.
  std::string type;
  std::vector<std::vector<std::string>> fields;
};

struct Predictions {
  bool have_log = false;
  std::string log_how;  // how the log covers the run ("every access", "first 12.5 % of ...")
  double coverage = 1;  // kept / total
  std::vector<PredictedFix> fixes;  // one per finding (same order)
  std::vector<LatentFalseSharing> latent;
};

struct PredictKnobs {
  size_t max_findings = 8;    // findings given a replayed fix (each replays the whole log)
  size_t max_objects = 64;    // heap objects tried for latent false sharing
  uint64_t min_misses = 64;   // a latent case needs at least this many more misses than today
};

// `findings` may carry object bounds the analysis did not know (globals named at report time);
// objects without bounds are not remapped.
Predictions predict(const profile::Profile& p, const std::vector<Finding>& findings,
                    const PredictKnobs& k = {});

// The L1 misses of the log replayed as recorded (no change), scaled to the run: for checks.
uint64_t replay_misses(const profile::Profile& p);

}  // namespace whymiss::analysis
