// What the profile-reading subcommands (report, run, check, diff) share: the one-sentence
// failure, and a profile made ready for the analysis.
#pragma once
#include <ostream>
#include <string>

#include "model/profile.h"
#include "model/result.h"

namespace whymiss::cli {

// Prints "whymiss: <sentence>" on `err` and returns 2, whymiss's own failure status.
int fail(std::ostream& err, const std::string& sentence);

// Sampled profiles (soft, pmu) carry raw facts: turns them into the records the analysis reads
// (analysis::estimate); exact profiles are left as they are. `name` names the profile in the error.
Status make_analysable(profile::Profile& p, const std::string& name);

// read_profile(path), then make_analysable; "-" is standard input.
Result<profile::Profile> read_analysable(const std::string& path);

}  // namespace whymiss::cli
