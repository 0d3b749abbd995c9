#include "report/mrc.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "analysis/mrc.h"
#include "report/common.h"

namespace whymiss::report {
namespace {

void json_curve(JsonWriter& w, const analysis::Mrc& m) {
  w.begin_object().field("line", m.line).field("how", m.how).field("model", "fully-associative LRU");
  w.field("rate", m.rate, 6).field("dropped", m.dropped);
  w.key("points").begin_array();
  for (const auto& pt : m.points) w.begin_object().field("size", pt.size).field("miss_ratio", pt.miss_ratio, 6).end_object();
  w.end_array().end_object();
}

std::string size_text(uint64_t b) {
  if (b >= (uint64_t(1) << 30) && b % (uint64_t(1) << 30) == 0) return std::to_string(b >> 30) + "G";
  if (b >= (uint64_t(1) << 20) && b % (uint64_t(1) << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

std::vector<uint64_t> finding_ips(const analysis::Finding& f) {
  std::vector<uint64_t> ips;
  for (const auto& i : f.instructions) ips.push_back(i.ip);
  return ips;
}

}  // namespace

void json_program_mrc(JsonWriter& w, const profile::Profile& p) {
  if (auto m = analysis::program_mrc(p)) {
    w.key("mrc");
    json_curve(w, *m);
  }
  const auto lines = analysis::other_mrc_lines(p);
  if (lines.empty()) return;
  w.key("mrc_other_lines").begin_array();
  for (uint32_t l : lines)
    if (auto m = analysis::program_mrc(p, l)) json_curve(w, *m);
  w.end_array();
}

void json_finding_mrc(JsonWriter& w, const profile::Profile& p, const analysis::Finding& f) {
  if (f.kind != analysis::Kind::Capacity && f.kind != analysis::Kind::Conflict) return;
  if (auto m = analysis::instructions_mrc(p, finding_ips(f))) {
    w.key("mrc");
    json_curve(w, *m);
  }
}

void text_program_mrc(std::ostream& out, const profile::Profile& p) {
  auto m = analysis::program_mrc(p);
  if (!m) return;
  std::vector<uint64_t> want;
  for (const auto& l : p.geometry.levels)
    for (uint64_t s : {l.size / 2, l.size, l.size * 2}) want.push_back(s);
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  out << "\nMiss ratio by cache size (fully-associative LRU, " << m->line << "-byte lines; [" << m->how << "]):\n";
  // One row per line size: the simulated one, then the others (twice, half), each saying how it
  // was obtained where that differs from the first row's.
  std::vector<analysis::Mrc> rows{*m};
  for (uint32_t l : analysis::other_mrc_lines(p))
    if (auto o = analysis::program_mrc(p, l)) rows.push_back(std::move(*o));
  std::string sizes = rows.size() > 1 ? "  size      " : "  size  ";
  for (uint64_t s : want)
    for (const auto& pt : m->points)
      if (pt.size == s) {
        char a[32];
        std::snprintf(a, sizeof a, "%8s", size_text(s).c_str());
        sizes += a;
      }
  out << sizes << "\n";
  for (const auto& r : rows) {
    char label[32];
    if (rows.size() > 1) std::snprintf(label, sizeof label, "  miss %4uB", r.line);
    else std::snprintf(label, sizeof label, "  miss  ");
    std::string row = label;
    for (uint64_t s : want)
      for (const auto& pt : r.points)
        if (pt.size == s) {
          char b[32];
          std::snprintf(b, sizeof b, "%7.2f%%", 100 * pt.miss_ratio);
          row += b;
        }
    if (r.how != m->how) row += "  [" + r.how + "]";
    out << row << "\n";
  }
}

}  // namespace whymiss::report
