// `whymiss report --view types`: the program's data types ranked by their misses (DProf's data
// profile), each with the kinds of its misses per level and its share of the program's misses.
#include <algorithm>
#include <cmath>
#include <ostream>

#include "analysis/data_types.h"
#include "report/common.h"
#include "report/data_view_common.h"
#include "report/sampled.h"
#include "report/view.h"

namespace whymiss::report {
namespace {

using namespace datatypes;

std::string objects_phrase(const analysis::TypeMisses& t) {
  std::string s;
  auto add = [&](uint32_t n, const char* one, const char* many) {
    if (!n) return;
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + (n == 1 ? one : many);
  };
  add(t.heap_objects, "heap object", "heap objects");
  add(t.globals, "global", "globals");
  return s;
}

class TypesView : public View {
 public:
  std::string_view name() const override { return "types"; }
  std::string_view summary() const override {
    return "data types ranked by misses, with the kinds of their misses per level";
  }

  void text(std::ostream& out, const ViewInput& in) const override {
    const auto& p = in.profile;
    const analysis::DataTypes d = analysis::data_types(p, in.types);
    out << "Data types by misses (" << basis(p) << ")\n";
    out << "program misses:";
    for (int l = 0; l < d.levels; ++l) out << " " << p.geometry.levels[size_t(l)].name << " " << count(p, d.program[l]);
    out << "\nnot placed (no sampled miss address, e.g. compulsory misses only):";
    for (int l = 0; l < d.levels; ++l) out << " " << p.geometry.levels[size_t(l)].name << " " << count(p, d.unplaced[l]);
    out << "\n";
    if (d.types.empty()) out << "\nNo misses were placed on data.\n";
    for (size_t i = 0; i < d.types.size(); ++i) {
      const auto& t = d.types[i];
      out << "\n" << (i + 1) << ". " << t.name;
      std::string what = t.known ? std::to_string(t.size) + " bytes" : "no type in the debug information";
      const std::string objs = objects_phrase(t);
      if (!objs.empty()) what += "; " + objs;
      out << " (" << what << ")\n";
      for (int l = 0; l < d.levels; ++l) {
        const double m = t.total(l);
        if (m <= 0) continue;
        out << "   " << p.geometry.levels[size_t(l)].name << " " << count(p, m) << " misses, "
            << share(p, d.program[l] > 0 ? m / d.program[l] : 0) << " of the program's: "
            << kind_split(p, t.misses[l]) << "\n";
      }
    }
  }

  void json(JsonWriter& w, const ViewInput& in) const override {
    const auto& p = in.profile;
    const analysis::DataTypes d = analysis::data_types(p, in.types);
    w.field("how", sampled::how(p)).field("placement", "modelled");
    w.key("program_misses").begin_object();
    for (int l = 0; l < d.levels; ++l) w.field(p.geometry.levels[size_t(l)].name, std::round(d.program[l]), 0);
    w.end_object().key("unplaced_misses").begin_object();
    for (int l = 0; l < d.levels; ++l) w.field(p.geometry.levels[size_t(l)].name, std::round(d.unplaced[l]), 0);
    w.end_object().key("types").begin_array();
    for (const auto& t : d.types) {
      w.begin_object().field("name", t.name).field("known", t.known);
      if (t.known) w.field("size", t.size);
      w.field("heap_objects", t.heap_objects).field("globals", t.globals);
      w.key("levels").begin_array();
      for (int l = 0; l < d.levels; ++l) {
        const double m = t.total(l);
        w.begin_object().field("level", p.geometry.levels[size_t(l)].name).field("misses", std::round(m), 0);
        w.field("share", d.program[l] > 0 ? std::min(1.0, m / d.program[l]) : 0.0, 4);
        w.key("by_kind");
        json_kinds(w, t.misses[l]);
        w.end_object();
      }
      w.end_array().end_object();
    }
    w.end_array();
  }
};

}  // namespace

const View& types_view() {
  static const TypesView v;
  return v;
}

}  // namespace whymiss::report
