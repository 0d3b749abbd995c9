// Limits a CI job puts on a profile's cache problems (`whymiss check`), and their evaluation
// against an analysis. Pure functions: parsing gives one-sentence errors, evaluation gives one
// sentence per violated limit and nothing when every limit holds.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "model/profile.h"
#include "model/result.h"

namespace whymiss::analysis {

struct Limit {
  // --max KIND[@LEVEL]=SHARE: the findings of KIND (at LEVEL, else at any one level) together
  // make at most SHARE of that level's misses. KIND "any" matches every kind.
  bool any_kind = false;
  Kind kind = Kind::Capacity;
  std::optional<std::string> level;  // a geometry level name, matched without case
  double max_share = 0;              // 0..1
  // --max-misses [LEVEL=]N: the level's misses (L1 when not named) are at most N.
  bool misses_limit = false;
  uint64_t max_misses = 0;
  std::string spec;  // as the user wrote it, for the messages
};

// "conflict@L1=5%", "false_sharing=0.01", "any@L2=20%". SHARE is a percentage with '%' or a
// fraction in [0, 1].
Result<Limit> parse_share_limit(std::string_view spec);
// "1000000", "L2=50000".
Result<Limit> parse_misses_limit(std::string_view spec);

// One sentence per violated limit, in the order given; empty when all hold. A level the
// profile does not have is an error (one sentence), not a pass.
Result<std::vector<std::string>> check_limits(const profile::Profile& p, const Analysis& a,
                                              const std::vector<Limit>& limits);

}  // namespace whymiss::analysis
