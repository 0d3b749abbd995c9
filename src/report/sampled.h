// Report pieces for sampled profiles (soft, pmu): how numbers were obtained, what backs them,
// and rounded renderings, so the text never shows precise-looking counts it cannot support.
// Internal to the report library.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "analysis/analysis.h"
#include "model/profile.h"
#include "report/json.h"

namespace whymiss::report::sampled {

bool is_sampled(const profile::Profile& p);  // soft or pmu

// "counted" (exact), "accesses sampled, misses modelled" (soft), "sampled" (pmu).
std::string how(const profile::Profile& p);

// "~530", "~12,000": two significant digits; "0" stays "0".
std::string approx(double v);
// "~6%": whole percent, "<1%" below one percent (but above zero).
std::string approx_pct(double f);

// "high" / "medium" / "low" from the samples, windows and captures behind a finding.
const char* confidence(const profile::Profile& p, const analysis::Finding& f);

// Text header lines: sampling source and period, discarded samples, capture stage, notes.
void text_header(std::ostream& out, const profile::Profile& p);
// Levels table with kinds as shares of each level's misses.
void text_levels(std::ostream& out, const profile::Profile& p);
// "~100% of L2 misses, in ~6% of samples [...]" and a "support:" line.
std::string text_finding_head(const profile::Profile& p, const analysis::Finding& f);
std::string text_support(const profile::Profile& p, const analysis::Finding& f);

// JSON: "sampling" object (source, samples, period, discarded, capture stage) for the header;
// "support" and "provenance" of a finding.
void json_sampling(JsonWriter& w, const profile::Profile& p);
void json_support(JsonWriter& w, const profile::Profile& p, const analysis::Finding& f);

}  // namespace whymiss::report::sampled
