#include "report/data_view_common.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "report/common.h"
#include "report/sampled.h"

namespace whymiss::report::datatypes {

std::string count(const profile::Profile& p, double v) {
  if (sampled::is_sampled(p)) return sampled::approx(v);
  return thousands(uint64_t(std::llround(v)));
}

std::string share(const profile::Profile& p, double f) {
  return sampled::is_sampled(p) ? sampled::approx_pct(f) : pct(f);
}

std::string kind_split(const profile::Profile& p, const double* misses, int max) {
  double total = 0;
  for (int k = 1; k < profile::kKinds; ++k) total += misses[k];
  std::vector<int> order;
  for (int k = 1; k < profile::kKinds; ++k)
    if (total > 0 && misses[k] / total >= 0.0005) order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return misses[a] > misses[b]; });
  if (int(order.size()) > max) order.resize(size_t(max));
  std::string s;
  for (int k : order) s += (s.empty() ? "" : ", ") + std::string(kKindNames[k]) + " " + share(p, misses[k] / total);
  return s.empty() ? "no misses" : s;
}

void json_kinds(JsonWriter& w, const double* misses) {
  w.begin_object();
  for (int k = 1; k < profile::kKinds; ++k) w.field(kKindNames[k], std::round(misses[k]), 0);
  w.end_object();
}

std::string basis(const profile::Profile& p) {
  return "misses " + sampled::how(p) + "; split onto data by sampled miss addresses: modelled";
}

std::string group_name(const std::string& type, size_t sites, uint32_t site, const profile::Profile& p, Namer& n) {
  const std::string at = site == profile::kNoSite || site >= p.sites.size() ? "an unknown site" : where(n.site(p.sites[site]));
  if (!type.empty())
    return printable(type) + (sites > 1 ? " (" + std::to_string(sites) + " sites)" : " (allocated at " + at + ")");
  return "objects allocated at " + at + " (type unknown)";
}

void site_json(JsonWriter& w, uint32_t site, const profile::Profile& p, Namer& n) {
  if (site == profile::kNoSite || site >= p.sites.size()) {
    w.null();
    return;
  }
  const CodeLoc c = n.site(p.sites[site]);
  w.begin_object().field("function", c.function).field("file", c.file).field("line", c.line).end_object();
}

}  // namespace whymiss::report::datatypes
