// The analysis: from a profile to findings, most severe first. Single-threaded by contract.
//
// Sharing findings come from cache lines with coherence misses (false if those misses are
// mostly false sharing); capacity and conflict findings from instructions, at the level where
// their misses cost most. Origin follows CachePerf: false sharing is the allocator's when the
// line holds heap objects allocated by different threads and used by different threads;
// conflict misses are the allocator's when they land on several heap objects that the
// allocator placed at the same offset within the cache's set period, unless most of them were
// evicted by the same object's own lines (ObjectRecord::self_conflicts: a stride within one
// object, which only padding fixes). Compulsory misses are
// counted but never a finding. Significance filters (CachePerf §3.5) are knobs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/unseen.h"
#include "model/profile.h"

namespace whymiss::analysis {

struct Knobs {
  double min_access_share = 0.0001;  // a finding's instructions do >= 0.01% of all accesses
  double min_miss_share = 0.01;      // and its misses are >= 1% of all misses at its level
  // Program gate: nothing is reported unless L1 load misses reach 3% of loads or L1 store
  // misses reach 1% of stores (CachePerf §4.5.4). 0 disables.
  double min_load_miss_rate = 0.03;
  double min_store_miss_rate = 0.01;
  uint64_t min_misses = 64;  // absolute floor: a handful of misses is never a finding
  // Modelled stall cycles per miss, by where the data came from (for ordering by severity).
  double penalty_next_level[profile::kLevels] = {14, 40, 200, 200};
  double penalty_coherence = 100;
};

enum class Kind { FalseSharing, TrueSharing, Conflict, Capacity };
// How a capacity finding's instructions walk memory (from profile::StepRecord), which decides
// the fix it suggests. Unknown without enough evidence (older profiles, soft mode's samples).
enum class Pattern { Unknown, Sweep, Strided, PointerChase, Random, Scattered };
const char* pattern_name(Pattern p);  // "unknown", "sweep", "strided", "pointer_chase", ...
enum class Origin { Application, Allocator };
const char* kind_name(Kind k);      // "false_sharing", ...
const char* origin_name(Origin o);  // "application", "allocator"

struct InstrRef {
  uint64_t ip = 0;
  uint64_t misses = 0;  // of the finding's kind at its level
};

struct ObjectRef {
  bool heap = false;
  uint64_t serial = 0;          // heap objects
  uint64_t start = 0, size = 0; // heap objects; 0 for others until named
  uint64_t sample_addr = 0;     // an address inside it (to name a global at report time)
  uint32_t alloc_thread = 0;
  uint32_t site = profile::kNoSite;
  std::vector<uint32_t> threads;  // thread indices that missed on it
  uint64_t misses = 0;
};

struct LineThread {  // one thread's use of a shared line
  uint32_t thread = 0;
  uint64_t read_mask = 0, write_mask = 0;  // byte granules
};

struct Evidence {
  std::string key;
  std::string text;  // human-readable value
  double number = 0;
  bool is_number = false;
};

struct Finding {
  Kind kind = Kind::Capacity;
  Origin origin = Origin::Application;
  int level = 0;             // index into the geometry
  uint64_t misses = 0;       // of this kind at this level
  double share = 0;          // of all misses at this level
  double cost = 0;           // modelled stall cycles
  std::vector<InstrRef> instructions;  // most misses first
  std::vector<ObjectRef> objects;
  std::vector<LineThread> line_threads;  // sharing findings
  uint64_t line_addr = 0;                // sharing findings: the (first) line's address
  uint32_t lines = 0;                    // sharing findings: lines merged into this finding
  std::vector<Evidence> evidence;
  Pattern pattern = Pattern::Unknown;  // capacity findings
  int64_t stride = 0;                  // Pattern::Strided: bytes between consecutive misses
  std::string suggestion;    // one line
  // The data's type and the field missed on, when the debug information says
  // (name_finding_types() in data_types.h); empty when unknown.
  std::string data_type, data_field;
  // How they were placed, when known: "counted: ..." (exact mode's byte masks of the shared
  // line) or "sampled: ..." ("3 of 4 sampled miss addresses"; soft mode's masks).
  std::string data_how;
};

struct Analysis {
  std::vector<Finding> findings;
  std::vector<std::string> notes;  // why something was not reported, data quality remarks
  // Exact mode: the program's CPU time outside instrumented code. analyze() leaves it unmeasured
  // (it needs to know which modules were instrumented): the caller fills it with unseen_work().
  UnseenWork unseen;
};

Analysis analyze(const profile::Profile& p, const Knobs& k = {});

// "0-7,16-23" for a granule mask (granule = line/64 bytes, 1 for 64-byte lines).
std::string byte_ranges(uint64_t mask, uint32_t granule);

}  // namespace whymiss::analysis
