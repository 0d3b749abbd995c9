// Data flow by type (DProf's path traces, #17 `report --view flow`): how a type's heap objects
// pass between threads, from their allocation through each thread that takes them over.
//
// Exact mode: from the runtime's handover counts (profile::FlowRecord), counted. Soft and pmu:
// from the sampled accesses (profile::SampleRecord: thread, address, heap object), replayed in
// time order with the same rules, so only handovers between sampled accesses are seen: the
// counts are sampled (a lower bound on handovers), and what is charged to a handover is sampled
// accesses, not misses.
//
// Objects are grouped by their data type where the TypeOracle knows it, else by allocation
// site.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/types.h"
#include "model/profile.h"

namespace whymiss::analysis {

struct FlowStep {
  uint32_t from = 0, to = 0;        // thread indices
  uint8_t from_kind = 0, to_kind = 0;  // profile::kFlow*
  uint64_t handovers = 0;
  uint64_t charged = 0;  // exact: L1 misses; sampled: sampled accesses
};

struct FlowGroup {
  std::string type;                 // "" when unknown: the group is one allocation site
  uint32_t site = profile::kNoSite; // the (first) site
  std::vector<uint32_t> sites;      // every site merged into the group
  uint64_t handovers = 0, charged = 0;
  // Transitions between different threads (the allocation's first touch by its own thread is
  // not one): what makes the data move between cores.
  uint64_t cross_thread = 0;
  std::vector<FlowStep> steps;      // allocation steps first, then most handovers first
  // The dominant path: from the allocation step with most handovers, each time the step out of
  // the last one's (thread, kind) with most handovers, until a step returns to a holder
  // already on the path (that step included). Indices into steps.
  std::vector<size_t> path;
};

struct Flow {
  bool available = false;
  std::string unavailable;          // one sentence when !available
  bool sampled = false;             // soft/pmu: from samples
  uint64_t objects = 0;             // objects touched (exact) or sampled
  uint64_t dropped_handovers = 0, dropped_charged = 0;
  uint64_t handovers = 0, charged = 0;
  std::vector<FlowGroup> groups;    // most charged first
};

Flow data_flow(const profile::Profile& p, TypeOracle& types);

const char* flow_kind_name(uint8_t kind);  // "alloc", "read", "write"

}  // namespace whymiss::analysis
