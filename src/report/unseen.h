// The report's view of work exact mode could not see (analysis/unseen.h): the program's CPU time
// in code whymiss-cc did not instrument. When that share is large the text report says so first,
// before the counts it qualifies; otherwise one header line says how much ran instrumented.
// Every number is marked as sampled. Internal to the report library.
#pragma once
#include <ostream>
#include <string>

#include "analysis/unseen.h"
#include "report/json.h"

namespace whymiss::report::unseen {

// The warning sentence (no newline), or "" when the share is below the warning threshold.
std::string warning(const analysis::UnseenWork& u);
// Text: the warning as the report's first line after its title (nothing when not warranted).
void text_first(std::ostream& out, const analysis::UnseenWork& u);
// Text: a "cpu time:" header line when measured but not warned about.
void text_header(std::ostream& out, const analysis::UnseenWork& u);
// JSON: the "cpu_time" field (nothing when the profile has no CPU-time samples).
void json(JsonWriter& w, const analysis::UnseenWork& u);

}  // namespace whymiss::report::unseen
