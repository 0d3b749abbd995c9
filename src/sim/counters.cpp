#include <string_view>

#include "sim/sim.h"

namespace whymiss::sim {

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::Hit: return "hit";
    case Outcome::Compulsory: return "compulsory";
    case Outcome::Capacity: return "capacity";
    case Outcome::Conflict: return "conflict";
    case Outcome::TrueSharing: return "true_sharing";
    case Outcome::FalseSharing: return "false_sharing";
  }
  return "?";
}

Result<Policy> parse_policy(std::string_view name) {
  if (name == "lru") return Policy::LRU;
  if (name == "plru" || name == "tree-plru") return Policy::TreePLRU;
  if (name == "random") return Policy::Random;
  return make_error("unknown replacement policy '" + std::string(name) +
                    "'; expected lru, plru or random");
}

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::LRU: return "lru";
    case Policy::TreePLRU: return "plru";
    case Policy::Random: return "random";
  }
  return "?";
}

uint64_t LevelCounters::accesses() const {
  uint64_t n = 0;
  for (int k = 0; k < kNumOutcomes; ++k) n += by_outcome[k][0] + by_outcome[k][1];
  return n;
}

LevelCounters& LevelCounters::operator+=(const LevelCounters& o) {
  for (int k = 0; k < kNumOutcomes; ++k)
    for (int w = 0; w < 2; ++w) by_outcome[k][w] += o.by_outcome[k][w];
  writebacks += o.writebacks;
  upgrades += o.upgrades;
  coherence_invalidations += o.coherence_invalidations;
  back_invalidations += o.back_invalidations;
  return *this;
}

Counters& Counters::operator+=(const Counters& o) {
  for (size_t i = 0; i < kMaxLevels; ++i) level[i] += o.level[i];
  accesses += o.accesses;
  line_accesses += o.line_accesses;
  return *this;
}

}  // namespace whymiss::sim
