// `report --view working-set`: per type (or allocation site), the lines resident at each cache
// level through the run (analysis/working_set.h), as a table of time buckets.
#include <cstdio>

#include "analysis/working_set.h"
#include "report/common.h"
#include "report/data_view_common.h"
#include "report/view.h"

namespace whymiss::report {
namespace {

std::string group_name(const analysis::WsGroup& g, const profile::Profile& p, Namer& n) {
  if (!g.heap) return "data outside the heap (globals, stacks, the runtime's own)";
  return datatypes::group_name(g.type, g.sites.size(), g.site, p, n);
}

constexpr size_t kTextRows = 16;  // time buckets per group in text

class WorkingSetView : public View {
 public:
  std::string_view name() const override { return "working-set"; }
  std::string_view summary() const override {
    return "per type, the lines resident at each cache level over time (exact; soft: estimated)";
  }

  void text(std::ostream& out, const ViewInput& in) const override {
    const analysis::WorkingSet w = analysis::working_set(in.profile, in.types);
    out << "Working set over time";
    if (!w.available) {
      out << ": unavailable: " << w.unavailable << ".\n";
      return;
    }
    const auto& levels = in.profile.geometry.levels;
    const size_t nl = std::min(levels.size(), size_t(profile::kLevels));
    if (w.replayed)
      out << " (estimated from the trace windows: what each epoch's replay left in\n"
             "the simulated caches, i.e. the windows' footprint, a lower bound of the working set at that\n"
             "time; time from the first traced window, L1 misses in traced accesses; private levels\n"
             "summed over cores)\nCapacity in lines:";
    else
      out << (w.estimated ? " (counted, big levels estimated" : " (counted") << ": the simulated caches' lines,\nsampled every " << thousands(w.period)
          << " L1 misses and at the end; private levels summed over cores)\nCapacity in lines:";
    for (size_t l = 0; l < nl; ++l)
      out << (l ? ", " : " ") << printable(levels[l].name) << " " << thousands(w.capacity_lines[l])
          << (l + 1 < nl || nl == 1 ? " a core" : "")
          << (w.set_step[l] > 1 ? " (estimated: lines of 1 set in " + std::to_string(w.set_step[l]) + " x " +
                                      std::to_string(w.set_step[l]) + ")"
                                : "");
    out << "\n";
    if (w.dropped_lines)
      out << thousands(w.dropped_lines) << " resident lines of sites past the first "
          << "64 per sample were not counted.\n";
    // Evenly spaced samples, always with the last.
    std::vector<size_t> rows;
    const size_t ns = w.samples.size();
    if (ns <= kTextRows) {
      for (size_t i = 0; i < ns; ++i) rows.push_back(i);
    } else {
      for (size_t r = 0; r < kTextRows; ++r) rows.push_back((ns - 1) * r / (kTextRows - 1));
    }
    const size_t limit = std::min<size_t>(in.options.max_findings, 8);
    size_t shown = 0;
    for (const auto& g : w.groups) {
      if (shown++ == limit) {
        out << "\n(" << w.groups.size() - limit << " more groups; --format json lists all)\n";
        break;
      }
      out << "\n" << group_name(g, in.profile, in.names) << "\n  peak lines:";
      for (size_t l = 0; l < nl; ++l)
        out << (l ? ", " : " ") << printable(levels[l].name) << " " << thousands(g.peak[l]);
      out << "\n";
      char buf[64];
      std::snprintf(buf, sizeof buf, "  %10s %14s", "time (ms)", "L1 misses");
      out << buf;
      for (size_t l = 0; l < nl; ++l) {
        std::snprintf(buf, sizeof buf, " %10s", printable(levels[l].name).c_str());
        out << buf;
      }
      out << "\n";
      for (size_t i : rows) {
        std::snprintf(buf, sizeof buf, "  %10.1f %14s", double(w.samples[i].time_ns) / 1e6,
                      thousands(w.samples[i].l1_misses).c_str());
        out << buf;
        for (size_t l = 0; l < nl; ++l) {
          std::snprintf(buf, sizeof buf, " %10s", thousands(g.lines[i][l]).c_str());
          out << buf;
        }
        out << "\n";
      }
    }
  }

  void json(JsonWriter& w, const ViewInput& in) const override {
    const analysis::WorkingSet ws = analysis::working_set(in.profile, in.types);
    w.field("obtained", ws.estimated ? "estimated" : "counted");
    w.field("available", ws.available);
    if (!ws.available) {
      w.field("unavailable", ws.unavailable);
      return;
    }
    const auto& levels = in.profile.geometry.levels;
    const size_t nl = std::min(levels.size(), size_t(profile::kLevels));
    w.field("period_l1_misses", ws.period).field("dropped_lines", ws.dropped_lines);
    w.key("levels").begin_array();
    for (size_t l = 0; l < nl; ++l)
      w.begin_object()
          .field("name", levels[l].name)
          .field("capacity_lines", ws.capacity_lines[l])
          .field("obtained", ws.replayed || ws.set_step[l] > 1 ? "estimated" : "counted")
          .field("set_step", uint64_t(ws.set_step[l]))
          .end_object();
    w.end_array();
    w.key("samples").begin_array();
    for (const auto& s : ws.samples)
      w.begin_object().field("time_ns", s.time_ns).field("l1_misses", s.l1_misses).end_object();
    w.end_array();
    w.key("groups").begin_array();
    for (const auto& g : ws.groups) {
      w.begin_object();
      w.key("type");
      if (g.type.empty()) w.null(); else w.value(g.type);
      w.field("heap", g.heap);
      w.key("alloc_site");
      if (g.heap) datatypes::site_json(w, g.site, in.profile, in.names);
      else w.null();
      w.field("sites", uint64_t(g.sites.size()));
      w.key("peak").begin_array();
      for (size_t l = 0; l < nl; ++l) w.value(g.peak[l]);
      w.end_array();
      w.key("lines").begin_array();
      for (const auto& s : g.lines) {
        w.begin_array();
        for (size_t l = 0; l < nl; ++l) w.value(s[l]);
        w.end_array();
      }
      w.end_array();
      w.end_object();
    }
    w.end_array();
  }
};

}  // namespace

const View& working_set_view() {
  static const WorkingSetView v;
  return v;
}

}  // namespace whymiss::report
