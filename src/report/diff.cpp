#include "report/diff.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "report/common.h"
#include "report/json.h"

namespace whymiss::report {
namespace {

// How a side's numbers were obtained.
const char* how(const profile::Profile& p) {
  return p.meta.mode == uint32_t(profile::Mode::Exact) ? "counted" : "estimated from samples";
}

uint64_t level_misses(const profile::Profile& p, size_t l) {
  uint64_t m = 0;
  if (l < p.counters.size())
    for (int k = 1; k < profile::kKinds; ++k) m += p.counters[l].by_kind[k][0] + p.counters[l].by_kind[k][1];
  return m;
}

// A finding's identity across runs: its kind, level and where its costliest instruction is.
struct FindingKey {
  std::string kind, level, where;
  auto operator<=>(const FindingKey&) const = default;
};
struct FindingSide {
  uint64_t misses = 0;
  std::string origin, suggestion;
};

std::map<FindingKey, FindingSide> findings_of(const DiffSide& s) {
  std::map<FindingKey, FindingSide> out;
  for (const auto& f : s.analysis.findings) {
    FindingKey k{analysis::kind_name(f.kind), s.profile.geometry.levels[size_t(f.level)].name,
                 f.instructions.empty() ? "?" : where(s.names.chain(f.instructions[0].ip))};
    FindingSide& v = out[k];
    v.misses += f.misses;
    v.origin = analysis::origin_name(f.origin);
    v.suggestion = f.suggestion;
  }
  return out;
}

// L1 misses per source line (by the out-of-line function's line), and per data object: a global
// by name, heap objects by allocation site (all objects of a site together).
std::map<std::string, uint64_t> lines_of(const DiffSide& s) {
  std::map<std::string, uint64_t> out;
  for (const SourceLine& sl : source_lines(s.profile, s.names)) out[where(sl.chain.back())] += sl.misses[0][0];
  return out;
}

std::map<std::string, uint64_t> objects_of(const DiffSide& s) {
  std::map<std::string, uint64_t> out;
  for (const auto& o : s.profile.objects) {
    uint64_t m = 0;
    for (int k = 2; k < profile::kKinds; ++k) m += o.misses[k];  // non-compulsory, at L1
    if (m == 0) continue;
    const std::string site =
        o.site < s.profile.sites.size() ? where(s.names.site(s.profile.sites[o.site])) : std::string("unknown site");
    out["heap objects allocated at " + site] += m;
  }
  return out;
}

struct Row {
  std::string name;
  uint64_t before = 0, after = 0;
  int64_t change() const { return int64_t(after) - int64_t(before); }
};

// Union of two keyed tables, largest absolute change first, at most `max`.
std::vector<Row> rows(const std::map<std::string, uint64_t>& b, const std::map<std::string, uint64_t>& a,
                      size_t max) {
  std::map<std::string, Row> u;
  for (const auto& [k, v] : b) u[k].before = v, u[k].name = k;
  for (const auto& [k, v] : a) u[k].after = v, u[k].name = k;
  std::vector<Row> out;
  for (auto& [k, r] : u)
    if (r.change() != 0) out.push_back(r);
  std::stable_sort(out.begin(), out.end(),
                   [](const Row& x, const Row& y) { return std::llabs(x.change()) > std::llabs(y.change()); });
  if (out.size() > max) out.resize(max);
  return out;
}

std::string signed_pct(uint64_t before, uint64_t after) {
  if (before == 0) return after ? "new" : "0";
  const double f = (double(after) - double(before)) / double(before);
  return (f >= 0 ? "+" : "") + pct(f);
}

std::string verdict(const FindingSide* b, const FindingSide* a, double same_within) {
  if (!a) return "fixed";
  if (!b) return "new";
  const double f = (double(a->misses) - double(b->misses)) / double(std::max<uint64_t>(1, b->misses));
  return f < -same_within ? "better" : f > same_within ? "worse" : "same";
}

}  // namespace

void write_diff(std::ostream& out, const DiffSide& before, const DiffSide& after, const DiffOptions& o) {
  const auto fb = findings_of(before), fa = findings_of(after);
  std::set<FindingKey> keys;
  for (const auto& [k, v] : fb) keys.insert(k);
  for (const auto& [k, v] : fa) keys.insert(k);
  const auto lines = rows(lines_of(before), lines_of(after), o.max_rows);
  const auto objects = rows(objects_of(before), objects_of(after), o.max_rows);
  const size_t nlevels = std::min(before.profile.geometry.levels.size(), after.profile.geometry.levels.size());
  const bool same_cache = before.profile.geometry.to_spec() == after.profile.geometry.to_spec();
  const std::string how_b = how(before.profile), how_a = how(after.profile);
  const std::string how_both = how_b == how_a ? how_b : "before " + how_b + ", after " + how_a;

  if (o.format == Format::Json) {
    JsonWriter w(out);
    w.begin_object().field("schema_version", 1).field("before", before.label).field("after", after.label);
    w.field("how", how_both).field("same_cache", same_cache);
    w.key("levels").begin_array();
    for (size_t l = 0; l < nlevels; ++l)
      w.begin_object()
          .field("level", before.profile.geometry.levels[l].name)
          .field("misses_before", level_misses(before.profile, l))
          .field("misses_after", level_misses(after.profile, l))
          .end_object();
    w.end_array().key("findings").begin_array();
    for (const FindingKey& k : keys) {
      const auto ib = fb.find(k), ia = fa.find(k);
      const FindingSide* b = ib == fb.end() ? nullptr : &ib->second;
      const FindingSide* a = ia == fa.end() ? nullptr : &ia->second;
      w.begin_object().field("verdict", verdict(b, a, o.same_within)).field("kind", k.kind);
      w.field("level", k.level).field("where", k.where);
      w.field("origin", (a ? a : b)->origin);
      w.field("misses_before", b ? b->misses : 0).field("misses_after", a ? a->misses : 0).end_object();
    }
    w.end_array();
    for (const auto& [name, list] : {std::pair{"source_lines", &lines}, std::pair{"objects", &objects}}) {
      w.key(name).begin_array();
      for (const Row& r : *list)
        w.begin_object().field("name", r.name).field("l1_misses_before", r.before).field("l1_misses_after", r.after).end_object();
      w.end_array();
    }
    w.end_object();
    out << "\n";
    return;
  }

  out << "whymiss diff: " << printable(before.label) << " -> " << printable(after.label) << " [" << how_both << "]\n";
  if (!same_cache)
    out << "note: the profiles simulated different caches (" << before.profile.geometry.to_spec() << " vs "
        << after.profile.geometry.to_spec() << "): counts compare the runs, not the code alone\n";
  out << "\nlevel          before          after   change\n";
  for (size_t l = 0; l < nlevels; ++l) {
    const uint64_t b = level_misses(before.profile, l), a = level_misses(after.profile, l);
    char buf[128];
    std::snprintf(buf, sizeof buf, "%-5s %15s %14s   %s\n", before.profile.geometry.levels[l].name.c_str(),
                  thousands(b).c_str(), thousands(a).c_str(), signed_pct(b, a).c_str());
    out << buf;
  }
  out << "\nFindings:\n";
  if (keys.empty()) out << "  none in either profile\n";
  for (const FindingKey& k : keys) {
    const auto ib = fb.find(k), ia = fa.find(k);
    const FindingSide* b = ib == fb.end() ? nullptr : &ib->second;
    const FindingSide* a = ia == fa.end() ? nullptr : &ia->second;
    std::string kind = k.kind;
    std::transform(kind.begin(), kind.end(), kind.begin(), [](unsigned char c) { return c == '_' ? ' ' : std::toupper(c); });
    char buf[64];
    std::snprintf(buf, sizeof buf, "  %-7s ", verdict(b, a, o.same_within).c_str());
    out << buf << kind << " (" << (a ? a : b)->origin << ") at " << k.level << ": " << thousands(b ? b->misses : 0)
        << " -> " << thousands(a ? a->misses : 0) << " misses  " << k.where << "\n";
  }
  for (const auto& [title, list] : {std::pair{"Source lines", &lines}, std::pair{"Heap objects, by allocation site,", &objects}}) {
    out << "\n" << title << " by change in L1 misses:\n";
    if (list->empty()) {
      out << "  no change\n";
      continue;
    }
    out << "        before          after   change  " << (list == &lines ? "line" : "object") << "\n";
    for (const Row& r : *list) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%14s %14s %8s  ", thousands(r.before).c_str(), thousands(r.after).c_str(),
                    signed_pct(r.before, r.after).c_str());
      out << buf << r.name << "\n";
    }
  }
}

}  // namespace whymiss::report
