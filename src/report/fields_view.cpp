// `whymiss report --view fields`: for each data type with misses, its misses by field and kind,
// the field pairs that false-share a line, and which fields are cold (no miss placed on them):
// the evidence for reordering, splitting or padding a struct.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "analysis/data_types.h"
#include "report/common.h"
#include "report/data_view_common.h"
#include "report/sampled.h"
#include "report/view.h"

namespace whymiss::report {
namespace {

using namespace datatypes;

constexpr size_t kMaxTypes = 10;    // types shown, most misses first
constexpr size_t kMaxFields = 32;   // fields listed per type (the rest are counted)

// One row per field of the layout (offset order), with the misses placed on it; padding that
// was missed on gets a row of its own, and a scalar type is one row.
std::vector<analysis::FieldMisses> field_rows(const analysis::TypeMisses& t) {
  std::vector<analysis::FieldMisses> rows;
  auto missed = [&](const std::string& name) -> const analysis::FieldMisses* {
    for (const auto& f : t.fields)
      if (f.name == name) return &f;
    return nullptr;
  };
  if (t.type && !t.type->fields.empty()) {
    for (const auto& f : t.type->fields) {
      analysis::FieldMisses r;
      if (const auto* m = missed(f.name)) r = *m;
      r.name = f.name;
      r.offset = f.offset;
      r.size = f.size;
      rows.push_back(r);
    }
    if (const auto* m = missed("(padding)")) rows.push_back(*m);
  } else {
    rows = t.fields;
  }
  return rows;
}

double all_levels(const analysis::FieldMisses& f) {
  double s = 0;
  for (int l = 0; l < profile::kLevels; ++l)
    for (int k = 1; k < profile::kKinds; ++k) s += f.misses[l][k];
  return s;
}

double at(const analysis::FieldMisses& f, int l) {
  double s = 0;
  for (int k = 1; k < profile::kKinds; ++k) s += f.misses[l][k];
  return s;
}

std::vector<const analysis::TypeMisses*> shown(const analysis::DataTypes& d) {
  std::vector<const analysis::TypeMisses*> v;
  for (const auto& t : d.types)
    if (t.known && v.size() < kMaxTypes) v.push_back(&t);
  return v;
}

const char* kSpatialUnavailable =
    "spatial use (bytes of a fetched line used before it left the cache) is not measured here";

class FieldsView : public View {
 public:
  std::string_view name() const override { return "fields"; }
  std::string_view summary() const override {
    return "per data type, misses by field and kind, false-sharing field pairs, cold fields";
  }

  void text(std::ostream& out, const ViewInput& in) const override {
    const auto& p = in.profile;
    const analysis::DataTypes d = analysis::data_types(p, in.types);
    const auto types = shown(d);
    const std::string l1 = p.geometry.levels.empty() ? "L1" : p.geometry.levels[0].name;
    out << "Misses by field (" << basis(p) << ")\n" << kSpatialUnavailable << ".\n";
    if (types.empty()) out << "\nNo misses were placed on data of a known type.\n";
    for (size_t i = 0; i < types.size(); ++i) {
      const auto& t = *types[i];
      out << "\n" << (i + 1) << ". " << t.name << " (" << t.size << " bytes): " << l1 << " "
          << count(p, t.total(0)) << " misses\n";
      const auto rows = field_rows(t);
      char head[160];
      std::snprintf(head, sizeof head, "   %-24s %7s %6s %12s %7s  %s", "field", "offset", "size",
                    (l1 + " misses").c_str(), "share", ("kinds at " + l1).c_str());
      out << head << "\n";
      std::vector<std::string> cold;
      size_t listed = 0;
      for (const auto& f : rows) {
        const double m = at(f, 0);
        if (all_levels(f) <= 0) cold.push_back(f.name);
        if (listed >= kMaxFields) continue;
        ++listed;
        std::string name = f.name.size() > 24 ? f.name.substr(0, 23) + "~" : f.name;
        char row[200];
        std::snprintf(row, sizeof row, "   %-24s %7llu %6llu %12s %7s  %s", name.c_str(),
                      (unsigned long long)f.offset, (unsigned long long)f.size, count(p, m).c_str(),
                      m > 0 ? share(p, t.total(0) > 0 ? m / t.total(0) : 0).c_str() : "-",
                      m > 0 ? kind_split(p, f.misses[0], 2).c_str() : "");
        std::string line = row;
        line.erase(line.find_last_not_of(' ') + 1);
        out << line << "\n";
      }
      if (rows.size() > listed) out << "   ... " << rows.size() - listed << " more fields\n";
      for (size_t j = 0; j < t.false_pairs.size() && j < 3; ++j) {
        const auto& fp = t.false_pairs[j];
        out << "   false sharing between " << fp.a << " and " << fp.b << ": " << count(p, fp.misses)
            << " " << l1 << " misses on " << fp.lines << (fp.lines == 1 ? " line\n" : " lines\n");
      }
      if (!cold.empty() && cold.size() < rows.size()) {
        std::string s;
        for (size_t j = 0; j < cold.size() && j < 8; ++j) s += (j ? ", " : "") + cold[j];
        if (cold.size() > 8) s += ", ...";
        out << "   cold (no miss placed on them): " << s << "\n";
      }
    }
  }

  void json(JsonWriter& w, const ViewInput& in) const override {
    const auto& p = in.profile;
    const analysis::DataTypes d = analysis::data_types(p, in.types);
    w.field("how", sampled::how(p)).field("placement", "modelled");
    w.key("spatial_use").begin_object().field("available", false).field("reason", kSpatialUnavailable);
    w.end_object().key("types").begin_array();
    for (const auto* tp : shown(d)) {
      const auto& t = *tp;
      w.begin_object().field("name", t.name).field("size", t.size);
      w.field("heap_objects", t.heap_objects).field("globals", t.globals);
      w.key("fields").begin_array();
      for (const auto& f : field_rows(t)) {
        w.begin_object().field("name", f.name).field("offset", f.offset).field("size", f.size);
        w.field("cold", all_levels(f) <= 0).key("levels").begin_array();
        for (int l = 0; l < d.levels; ++l) {
          w.begin_object().field("level", p.geometry.levels[size_t(l)].name);
          w.field("misses", std::round(at(f, l)), 0).key("by_kind");
          json_kinds(w, f.misses[l]);
          w.end_object();
        }
        w.end_array().end_object();
      }
      w.end_array().key("false_sharing_pairs").begin_array();
      for (const auto& fp : t.false_pairs) {
        w.begin_object().field("a", fp.a).field("b", fp.b);
        w.field("misses", std::round(fp.misses), 0).field("lines", fp.lines).end_object();
      }
      w.end_array().end_object();
    }
    w.end_array();
  }
};

}  // namespace

const View& fields_view() {
  static const FieldsView v;
  return v;
}

}  // namespace whymiss::report
