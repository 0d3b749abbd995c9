// `report --view flow`: how each type's heap objects move between threads (analysis/flow.h):
// the dominant path from allocation (alloc T0 -> write T1 -> read T2), then every step with
// its handovers and what it cost.
#include <cstdio>

#include "analysis/flow.h"
#include "report/common.h"
#include "report/data_view_common.h"
#include "report/view.h"

namespace whymiss::report {
namespace {

std::string thread_name(uint32_t t) { return "T" + std::to_string(t); }

std::string event(uint8_t kind, uint32_t thread) {
  return std::string(analysis::flow_kind_name(kind)) + " " + thread_name(thread);
}

class FlowView : public View {
 public:
  std::string_view name() const override { return "flow"; }
  std::string_view summary() const override {
    return "per type, how its heap objects pass between threads (alloc -> write -> read), with the "
           "misses each handover causes";
  }

  void text(std::ostream& out, const ViewInput& in) const override {
    const analysis::Flow f = analysis::data_flow(in.profile, in.types);
    out << "Data flow between threads";
    if (!f.available) {
      out << ": unavailable: " << f.unavailable << ".\n";
      return;
    }
    const char* unit = f.sampled ? "sampled accesses" : "L1 misses";
    out << (f.sampled ? " (sampled: handovers between sampled accesses of each object; a lower bound)\n"
                      : " (counted: every L1 miss and write upgrade on a heap object)\n");
    out << thousands(f.objects) << " heap objects followed, " << thousands(f.handovers)
        << " handovers, " << thousands(f.charged) << " " << unit << " charged to them";
    if (f.dropped_handovers)
      out << "; " << thousands(f.dropped_handovers) << " handovers (" << thousands(f.dropped_charged)
          << " " << unit << ") dropped, table full";
    out << ".\nA handover: a thread touches an object another thread (or its allocation) touched "
           "last; the\n"
        << unit << " the receiving thread then has on it, until the next handover, are charged to it.\n";
    if (f.groups.empty()) {
      out << "\nNo heap object was touched.\n";
      return;
    }
    const size_t limit = in.options.max_findings;
    size_t shown = 0;
    for (const auto& g : f.groups) {
      if (shown++ == limit) {
        out << "\n(" << f.groups.size() - limit << " more groups; --format json lists all)\n";
        break;
      }
      out << "\n" << datatypes::group_name(g.type, g.sites.size(), g.site, in.profile, in.names) << "\n";
      if (!g.path.empty()) {
        out << "  path: " << event(profile::kFlowAlloc, g.steps[g.path[0]].from);
        for (size_t i : g.path) out << " -> " << event(g.steps[i].to_kind, g.steps[i].to);
        out << "\n";
      }
      char line[160];
      std::snprintf(line, sizeof line, "  %12s %14s  %s\n", "handovers", f.sampled ? "samples" : "L1 misses", "step");
      out << line;
      size_t nsteps = 0;
      for (const auto& s : g.steps) {
        if (nsteps++ == 12) {
          out << "  (" << g.steps.size() - 12 << " more steps)\n";
          break;
        }
        const std::string step = event(s.from_kind, s.from) + " -> " + event(s.to_kind, s.to);
        std::snprintf(line, sizeof line, "  %12s %14s  %s\n", thousands(s.handovers).c_str(),
                      thousands(s.charged).c_str(), step.c_str());
        out << line;
      }
    }
  }

  void json(JsonWriter& w, const ViewInput& in) const override {
    const analysis::Flow f = analysis::data_flow(in.profile, in.types);
    w.field("obtained", f.sampled ? "sampled" : "counted");
    w.field("available", f.available);
    if (!f.available) {
      w.field("unavailable", f.unavailable);
      return;
    }
    w.field("charged_unit", f.sampled ? "sampled_accesses" : "l1_misses");
    w.field("objects", f.objects).field("handovers", f.handovers).field("charged", f.charged);
    w.field("dropped_handovers", f.dropped_handovers).field("dropped_charged", f.dropped_charged);
    w.key("groups").begin_array();
    for (const auto& g : f.groups) {
      w.begin_object();
      w.key("type");
      if (g.type.empty()) w.null(); else w.value(g.type);
      w.key("alloc_site");
      datatypes::site_json(w, g.site, in.profile, in.names);
      w.field("sites", uint64_t(g.sites.size()));
      w.field("handovers", g.handovers).field("charged", g.charged).field("cross_thread", g.cross_thread);
      w.key("path").begin_array();
      if (!g.path.empty()) {
        w.begin_object().field("kind", "alloc").field("thread", g.steps[g.path[0]].from).end_object();
        for (size_t i : g.path)
          w.begin_object()
              .field("kind", analysis::flow_kind_name(g.steps[i].to_kind))
              .field("thread", g.steps[i].to)
              .end_object();
      }
      w.end_array();
      w.key("steps").begin_array();
      for (const auto& s : g.steps)
        w.begin_object()
            .field("from", s.from)
            .field("from_kind", analysis::flow_kind_name(s.from_kind))
            .field("to", s.to)
            .field("to_kind", analysis::flow_kind_name(s.to_kind))
            .field("handovers", s.handovers)
            .field("charged", s.charged)
            .end_object();
      w.end_array();
      w.end_object();
    }
    w.end_array();
  }
};

}  // namespace

const View& flow_view() {
  static const FlowView v;
  return v;
}

}  // namespace whymiss::report
