// What backs a finding of a sampled profile, and how its numbers were obtained (for the report).
#include <set>

#include "analysis/estimate.h"

namespace whymiss::analysis {

namespace {
std::set<uint64_t> ips_of(const Finding& f) {
  std::set<uint64_t> ips;
  for (const InstrRef& r : f.instructions) ips.insert(r.ip);
  return ips;
}
bool sharing(const Finding& f) { return f.kind == Kind::FalseSharing || f.kind == Kind::TrueSharing; }
}  // namespace

Support support(const profile::Profile& p, const Finding& f) {
  Support s;
  const std::set<uint64_t> ips = ips_of(f);
  for (const auto& r : p.samples) s.samples += ips.count(r.ip);
  for (const auto& w : p.windows) s.windows += ips.count(w.ip);
  for (const auto& c : p.captures) s.captures += ips.count(c.ip);
  return s;
}

std::string provenance(const profile::Profile& p, const Finding& f) {
  using profile::Mode;
  if (p.meta.mode == uint32_t(Mode::Exact)) return "counted";
  const Support s = support(p, f);
  const bool pmu = p.meta.mode == uint32_t(Mode::Pmu);
  if (sharing(f)) {
    std::set<uint32_t> capture_threads;
    const uint32_t line = p.geometry.line();
    for (const auto& c : p.captures)
      if (line && c.addr / line == f.line_addr / line) capture_threads.insert(c.thread);
    const char* kind = "; true vs false sharing from the bytes each thread was seen to access";
    if (pmu) return std::string("sampled: misses are the samples on the line whose data came from beyond L1") + kind;
    // Int3 captures never decide coherence (estimate.cpp, by_samples).
    if (capture_threads.size() >= 2 && p.meta.capture_backend != uint32_t(profile::CaptureBackend::Int3))
      return std::string("accesses sampled; coherence misses modelled by replaying captures of ") +
             std::to_string(capture_threads.size()) + " threads" + kind;
    return std::string("accesses sampled; coherence misses modelled by replaying the threads' samples of the line") + kind;
  }
  if (pmu)
    return s.captures ? "sampled: misses from each sample's data source; kind from replaying captured windows"
                      : "sampled: misses from each sample's data source; kind from the sets and footprint of the sampled misses (no windows)";
  return s.captures ? "accesses sampled; misses modelled by replaying captured windows, and the samples' reuse spans for lines a window saw first"
                    : "accesses sampled; misses modelled from samples only (set concentration, sweep span; no windows)";
}

}  // namespace whymiss::analysis
