// Renders the result of `whymiss simulate`: the counters of an exact simulation, with the
// geometry and knobs that produced them, as text for people or JSON for programs.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "model/geometry.h"
#include "sim/sim.h"

namespace whymiss {

struct SimReport {
  std::string trace;     // the trace as named by the user ("-" for stdin)
  uint64_t threads = 0;  // distinct thread numbers in the trace
  CacheGeometry geometry;
  sim::Knobs knobs;
  sim::Counters counters;
};

inline constexpr int kSimReportSchemaVersion = 1;

// At most 100 columns wide.
void write_sim_report_text(std::ostream& out, const SimReport& r);

// One JSON object; see the schema in sim_report.cpp.
void write_sim_report_json(std::ostream& out, const SimReport& r);

}  // namespace whymiss
