// What backs a finding of a sampled profile, and how its numbers were obtained (for the report).
#include <algorithm>
#include <set>
#include <unordered_map>

#include "analysis/estimate.h"
#include "analysis/estimate_internal.h"

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
  for (const auto& a : p.trace_accesses) s.traced += ips.count(a.ip);
  return s;
}

std::string provenance(const profile::Profile& p, const Finding& f) {
  using profile::Mode;
  if (p.meta.mode == uint32_t(Mode::Exact)) return "counted";
  if (uses_traces(p)) {
    const TraceSummary t = trace_summary(p);
    auto n = [](uint64_t v, const char* noun) { return std::to_string(v) + " " + noun + (v == 1 ? "" : "s"); };
    std::string s = "accesses traced in " + n(t.windows, "thread window") + " of " + n(t.epochs, "epoch") +
                    "; misses counted by replaying them (steady state)";
    if (sharing(f)) {
      s += "; threads interleaved access by access";
      if (t.timed_groups) s += ", each paused about as long as its system calls took (wall time)";
      if (t.overlap >= 0) s += ", and they stepped at the same time " + std::to_string(int(t.overlap * 100 + 0.5)) + "% of the traced time";
    }
    return s;
  }
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

namespace est {

std::map<uint64_t, Sweep> sample_sweeps(const profile::Profile& p) {
  std::unordered_map<uint64_t, const profile::ObjectRecord*> objects;
  for (const auto& o : p.objects) objects[o.serial] = &o;
  auto pos = [&](uint64_t obj, uint64_t addr, uint64_t* bound) {
    *bound = UINT64_MAX;
    auto it = objects.find(obj);
    if (obj && it != objects.end() && addr >= it->second->start) {
      *bound = it->second->size;
      return addr - it->second->start;
    }
    return addr;
  };
  std::map<uint64_t, std::map<std::pair<uint32_t, uint64_t>, std::vector<const profile::SampleRecord*>>> groups;
  for (const auto& s : p.samples) groups[s.ip][{s.thread, s.object}].push_back(&s);
  std::map<uint64_t, Sweep> out;
  for (auto& [ip, by_key] : groups) {
    Sweep& x = out[ip];
    for (auto& [key, v] : by_key) {
      std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->time_ns < b->time_ns; });
      uint64_t bound = 0, run_max = 0;
      for (size_t j = 0; j < v.size(); ++j) {
        const uint64_t at = pos(v[j]->object, v[j]->addr, &bound);
        if (j == 0) {
          run_max = at;
          continue;
        }
        const uint64_t prev = pos(v[j - 1]->object, v[j - 1]->addr, &bound);
        if (at > prev) ++x.fwd;
        if (at < prev) {
          ++x.back;
          x.span = std::max(x.span, std::min(run_max - at, bound));
          run_max = at;
        }
        run_max = std::max(run_max, at);
      }
    }
  }
  return out;
}

void name_line_objects(const std::vector<profile::ObjectRecord>& objects, uint32_t line, uint64_t touched,
                       profile::LineRecord& r) {
  const uint64_t lo = r.line * line, hi = lo + line;
  const uint64_t granule = std::max<uint64_t>(1, line / 64);
  // Does [start, end) cover a touched granule? Without masks every overlapping object counts.
  auto touches = [&](uint64_t start, uint64_t end) {
    if (touched == 0) return true;
    const uint64_t a = std::max(start, lo) - lo, b = std::min(end, hi) - lo;
    for (uint64_t g = a / granule; g * granule < b && g < 64; ++g)
      if (touched >> g & 1) return true;
    return false;
  };
  for (const profile::ObjectRecord& o : objects)
    if (o.start < hi && o.start + o.size > lo && touches(o.start, o.start + o.size)) {
      if (r.object_count < uint32_t(profile::kRefs)) r.objects[r.object_count] = o.serial;
      r.object_count++;
    }
}

}  // namespace est
}  // namespace whymiss::analysis
