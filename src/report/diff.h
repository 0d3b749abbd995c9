// `whymiss diff`: what changed between two profiles of one program (before and after a change),
// per cache level, per finding, per source line and per data object. Code and data are matched
// by name (function and source line; global name or allocation site), never by address, so two
// runs at different addresses (ASLR, another build) still line up.
#pragma once
#include <ostream>
#include <string>

#include "analysis/analysis.h"
#include "model/profile.h"
#include "report/report.h"

namespace whymiss::report {

struct DiffSide {
  const profile::Profile& profile;  // after analysis::estimate() for sampled modes
  const analysis::Analysis& analysis;
  Namer& names;
  std::string label;  // the profile's file name, as the user gave it
};

struct DiffOptions {
  Format format = Format::Text;
  size_t max_rows = 15;  // source lines and objects, largest changes first
  // A finding whose misses moved by less than this fraction is "same", else "better"/"worse".
  double same_within = 0.10;
};

// Verdict per finding: "fixed" (gone), "new", "better", "worse", "same".
void write_diff(std::ostream& out, const DiffSide& before, const DiffSide& after, const DiffOptions& o);

}  // namespace whymiss::report
