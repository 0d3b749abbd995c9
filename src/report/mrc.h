// Miss-ratio curves in the report (analysis/mrc.h): the program's curve and each capacity or
// conflict finding's, in JSON ("mrc": {"line", "how", "points": [{"size", "miss_ratio"}]}) and as
// a compact text table at the machine's level sizes, half and double.
#pragma once
#include <ostream>
#include <vector>

#include "analysis/analysis.h"
#include "model/profile.h"
#include "report/json.h"

namespace whymiss::report {

// JSON: "mrc" (the simulated line size) and "mrc_other_lines" (twice it), when the profile has
// reuse histograms; nothing otherwise.
void json_program_mrc(JsonWriter& w, const profile::Profile& p);
// JSON: the finding's "mrc", when its instructions all have histograms.
void json_finding_mrc(JsonWriter& w, const profile::Profile& p, const analysis::Finding& f);
// Text: the program's curve at each level's size, half and double.
void text_program_mrc(std::ostream& out, const profile::Profile& p);

}  // namespace whymiss::report
