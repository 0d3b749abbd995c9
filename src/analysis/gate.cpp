#include "analysis/gate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace whymiss::analysis {
namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string pct(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * share);
  return buf;
}

std::string grouped(uint64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

// How the profile's numbers were obtained, for the messages.
const char* how(const profile::Profile& p) {
  return p.meta.mode == uint32_t(profile::Mode::Exact) ? "counted" : "estimated from samples";
}

std::optional<size_t> level_index(const profile::Profile& p, const std::string& name) {
  for (size_t l = 0; l < p.geometry.levels.size(); ++l)
    if (same_name(p.geometry.levels[l].name, name)) return l;
  return std::nullopt;
}

std::string level_names(const profile::Profile& p) {
  std::string s;
  for (const auto& l : p.geometry.levels) s += (s.empty() ? "" : ", ") + l.name;
  return s;
}

}  // namespace

Result<Limit> parse_share_limit(std::string_view spec) {
  Limit l;
  l.spec = std::string(spec);
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos)
    return make_error("limit '" + l.spec + "' is not KIND[@LEVEL]=SHARE (e.g. conflict@L1=5%)");
  std::string_view lhs = spec.substr(0, eq), rhs = spec.substr(eq + 1);
  if (const size_t at = lhs.find('@'); at != std::string_view::npos) {
    l.level = std::string(lhs.substr(at + 1));
    lhs = lhs.substr(0, at);
    if (l.level->empty()) return make_error("limit '" + l.spec + "' names no level after '@'");
  }
  if (lhs == "any") {
    l.any_kind = true;
  } else {
    bool found = false;
    for (Kind k : {Kind::FalseSharing, Kind::TrueSharing, Kind::Conflict, Kind::Capacity})
      if (lhs == kind_name(k)) l.kind = k, found = true;
    if (!found)
      return make_error("limit '" + l.spec + "' names no known kind (false_sharing, true_sharing, "
                        "conflict, capacity or any)");
  }
  std::string value(rhs);
  const bool percent = !value.empty() && value.back() == '%';
  if (percent) value.pop_back();
  char* end = nullptr;
  const double v = value.empty() ? NAN : std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || (percent ? v > 100 : v > 1))
    return make_error("limit '" + l.spec + "' needs a share: a percentage such as 5% or a fraction from 0 to 1");
  l.max_share = percent ? v / 100 : v;
  return l;
}

Result<Limit> parse_misses_limit(std::string_view spec) {
  Limit l;
  l.spec = std::string(spec);
  l.misses_limit = true;
  std::string_view n = spec;
  if (const size_t eq = spec.find('='); eq != std::string_view::npos) {
    l.level = std::string(spec.substr(0, eq));
    n = spec.substr(eq + 1);
    if (l.level->empty()) return make_error("limit '" + l.spec + "' names no level before '='");
  }
  const std::string digits(n);
  if (digits.empty() || digits.size() > 19 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return make_error("limit '" + l.spec + "' needs a whole number of misses, as in 1000000 or L2=50000");
  l.max_misses = std::strtoull(digits.c_str(), nullptr, 10);
  return l;
}

Result<std::vector<std::string>> check_limits(const profile::Profile& p, const Analysis& a,
                                              const std::vector<Limit>& limits) {
  std::vector<std::string> out;
  const size_t nlevels = std::min(p.geometry.levels.size(), p.counters.size());
  auto level_misses = [&](size_t l) {
    uint64_t m = 0;
    for (int k = 1; k < profile::kKinds; ++k) m += p.counters[l].by_kind[k][0] + p.counters[l].by_kind[k][1];
    return m;
  };
  for (const Limit& lim : limits) {
    std::optional<size_t> only;
    if (lim.level) {
      only = level_index(p, *lim.level);
      if (!only || *only >= nlevels)
        return make_error("limit '" + lim.spec + "' names level '" + *lim.level +
                          "', which this profile does not have (it has " + level_names(p) + ")");
    }
    if (lim.misses_limit) {
      const size_t l = only.value_or(0);
      const uint64_t m = level_misses(l);
      if (m > lim.max_misses)
        out.push_back(p.geometry.levels[l].name + " misses are " + grouped(m) + " (" + how(p) +
                      "), above the limit of " + grouped(lim.max_misses) + " (--max-misses " + lim.spec + ")");
      continue;
    }
    // The findings' shares, summed per level; the worst level decides when none is named.
    std::vector<double> share(nlevels, 0);
    std::vector<uint64_t> misses(nlevels, 0);
    for (const Finding& f : a.findings) {
      if ((!lim.any_kind && f.kind != lim.kind) || size_t(f.level) >= nlevels) continue;
      share[size_t(f.level)] += f.share;
      misses[size_t(f.level)] += f.misses;
    }
    size_t worst = only.value_or(0);
    if (!only)
      for (size_t l = 0; l < nlevels; ++l)
        if (share[l] > share[worst]) worst = l;
    if (nlevels == 0 || share[worst] <= lim.max_share + 1e-12) continue;
    const std::string what = lim.any_kind ? std::string("cache problems") : std::string(kind_name(lim.kind)) + " problems";
    out.push_back(what + " at " + p.geometry.levels[worst].name + " account for " + pct(share[worst]) + " of " +
                  p.geometry.levels[worst].name + " misses (" + grouped(misses[worst]) + " misses, " + how(p) +
                  "), above the limit of " + pct(lim.max_share) + " (--max " + lim.spec + ")");
  }
  return out;
}

}  // namespace whymiss::analysis
