// What-if predictions in the report (analysis/predict.h): each finding's "predicted_fix" and the
// program's "latent_false_sharing", in JSON and text.
#pragma once
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/predict.h"
#include "analysis/types.h"
#include "model/profile.h"
#include "report/json.h"
#include "report/report.h"

namespace whymiss::report {

// The predictions for a report's findings: globals named (their bounds from `n`) so that a fix
// can move them; latent false sharing named with the object's type and each thread's fields
// where `types` knows them. Runs the replays: call once per report.
analysis::Predictions predictions(const profile::Profile& p, const std::vector<analysis::Finding>& findings,
                                  Namer& n, analysis::TypeOracle& types, size_t max_findings);

// JSON: the finding's "predicted_fix" (nothing when there is none).
void json_predicted_fix(JsonWriter& w, const profile::Profile& p, const analysis::PredictedFix& fx);
// JSON: "latent_false_sharing": [...] (an empty array when the profile has an access log and
// nothing was predicted; absent without a log).
void json_latent(JsonWriter& w, const profile::Profile& p, const analysis::Predictions& pr, Namer& n);
// Text: "   fix predicted: ..." for a finding.
void text_predicted_fix(std::ostream& out, const profile::Profile& p, const analysis::PredictedFix& fx);
// Text: the latent false sharing section.
void text_latent(std::ostream& out, const profile::Profile& p, const analysis::Predictions& pr, Namer& n);
// HTML: the fix's predicted effect, one escaped sentence for the finding's fix box ("" when none).
std::string html_predicted_fix(const profile::Profile& p, const analysis::PredictedFix& fx);
// HTML: the latent false sharing section (nothing when no case was predicted).
void html_latent(std::ostringstream& s, const profile::Profile& p, const analysis::Predictions& pr, Namer& n);

}  // namespace whymiss::report
