// `whymiss report --view fields`: for each data type with misses, its misses by field and kind,
// the field pairs that false-share a line, and which fields are cold (no miss placed on them):
// the evidence for reordering, splitting or padding a struct. Exact mode adds spatial use: the
// share of the bytes of each type's fetched lines touched before L1 evicted them, and the cold
// fields that ride along in lines whose other fields are used (analysis/spatial_use.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "analysis/data_types.h"
#include "analysis/spatial_use.h"
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

const char* kSpatialBasis =
    "spatial use (counted): the share of the bytes of L1 lines evicted to make room that the "
    "program touched while L1 held them; lines invalidated by another core, dropped by inclusion "
    "or still cached at the end are not counted";

std::string pct(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * f);
  return b;
}

std::vector<std::string> riding(const analysis::TypeUse& u) {
  std::vector<std::string> v;
  for (const auto& f : u.fields)
    if (f.riding && f.name != "(padding)") v.push_back(f.name);
  return v;
}

// `text` broken at spaces into lines of at most `width` columns.
std::string wrapped(const std::string& text, size_t width) {
  std::string out, line;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(' ', i);
    if (j == std::string::npos) j = text.size();
    const std::string word = text.substr(i, j - i);
    if (!line.empty() && line.size() + 1 + word.size() > width) out += line + "\n", line.clear();
    line += (line.empty() ? "" : " ") + word;
    i = j + 1;
  }
  return out + line + "\n";
}

// "   spatial use: 12.5% of fetched bytes touched before eviction (counted, 1,234 lines)" and the
// cold fields riding along, for a type with evicted lines; lines stay within 100 columns.
void spatial_lines(std::ostream& out, const profile::Profile& p, const analysis::TypeUse& u) {
  out << "   spatial use: " << pct(u.use) << " of fetched bytes touched before eviction (counted, "
      << count(p, double(u.lines)) << (u.lines == 1 ? " line)\n" : " lines)\n");
  if (!u.per_field) {
    out << "   per field: not resolved (" << u.size << "-byte elements do not divide a 64-byte line)\n";
    return;
  }
  const auto r = riding(u);
  if (r.empty()) {
    out << "   no cold field rides along\n";
    return;
  }
  std::string line = "   cold fields riding along (under " + pct(analysis::kRidingShare) + " touched): ";
  for (size_t j = 0; j < r.size(); ++j) {
    const std::string item = r[j] + (j + 1 < r.size() ? "," : "");
    if (line.size() + item.size() + 1 > 100) {
      out << line << "\n";
      line = "     ";
    }
    line += (line.back() == ' ' ? "" : " ") + item;
  }
  out << line << "\n";
}

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
    const analysis::SpatialUse su = analysis::spatial_use(p, in.types);
    out << "Misses by field (" << basis(p) << ")\n";
    if (su.available)
      out << "Spatial use (counted): bytes of L1 lines evicted to make room that were touched while L1\n"
             "held them; lines invalidated by another core, dropped by inclusion or still cached at the\n"
             "end are not counted.\n";
    else out << wrapped("Spatial use is not available: " + su.reason + ".", 100);
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
      if (const analysis::TypeUse* u = analysis::find_type_use(su, t.name)) spatial_lines(out, p, *u);
    }
  }

  void json(JsonWriter& w, const ViewInput& in) const override {
    const auto& p = in.profile;
    const analysis::DataTypes d = analysis::data_types(p, in.types);
    w.field("how", sampled::how(p)).field("placement", "modelled");
    const analysis::SpatialUse su = analysis::spatial_use(p, in.types);
    w.key("spatial_use").begin_object().field("available", su.available);
    if (!su.available) {
      w.field("reason", su.reason);
    } else {
      w.field("how", "counted").field("basis", kSpatialBasis).field("line_bytes", su.line_bytes);
      w.field("evicted_lines", su.evicted_lines).field("outside_objects", su.outside_lines);
      w.field("untyped_lines", su.untyped_lines).field("dropped_lines", su.dropped_lines);
      w.field("riding_below", analysis::kRidingShare, 3);
      w.key("types").begin_array();
      for (const auto& u : su.types) {
        w.begin_object().field("name", u.name).field("size", u.size).field("objects", u.objects);
        w.field("lines", u.lines).field("fetched_bytes", u.fetched).field("touched_bytes", u.touched);
        w.field("use", u.use, 4).field("per_field", u.per_field).key("fields").begin_array();
        for (const auto& f : u.fields) {
          w.begin_object().field("name", f.name).field("offset", f.offset).field("size", f.size);
          w.field("fetched_bytes", f.fetched).field("touched_bytes", f.touched);
          w.field("use", f.use, 4).field("riding", f.riding).end_object();
        }
        w.end_array().key("riding").begin_array();
        for (const auto& r : riding(u)) w.value(r);
        w.end_array().end_object();
      }
      w.end_array();
    }
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
