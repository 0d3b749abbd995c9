// `whymiss report --view sets`: per cache level, accesses and misses per set (the hot sets,
// a histogram over the set index), and CCProf's re-conflict distance per finding and per hot
// instruction, its conflict verdict beside whymiss's own kinds (analysis/sets.h).
#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "analysis/sets.h"
#include "report/common.h"
#include "report/view.h"

namespace whymiss::report {
namespace {

using analysis::Rcd;
using analysis::SetsView;

const char* kMissKinds[profile::kKinds] = {"hit", "compulsory", "capacity", "conflict",
                                           "true_sharing", "false_sharing"};

std::string rcd_range(int b) {  // "0", "1", "2-3", "4-7", ...
  if (b < 0) return "-";
  const uint64_t lo = profile::rcd_bucket_low(b);
  if (b == profile::kRcdBuckets - 1) return thousands(lo) + "+";
  const uint64_t hi = profile::rcd_bucket_low(b + 1) - 1;
  return lo == hi ? thousands(lo) : thousands(lo) + "-" + thousands(hi);
}

const char* verdict(const Rcd& r) {
  return r.pairs == 0 ? "no distances" : r.conflict() ? "conflict" : "no conflict";
}

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

std::string ways_of(const profile::Profile& p, int l) {
  return std::to_string(p.geometry.levels[size_t(l)].ways) + "-way";
}

void rcd_json(JsonWriter& w, const Rcd& r) {
  w.key("rcd").begin_object();
  w.field("first", r.first).field("distances", r.pairs).field("short", r.short_);
  w.field("cf", r.cf(), 4);
  const int m = r.median_bucket();
  if (m < 0) w.key("median").null();
  else w.key("median").begin_object().field("low", profile::rcd_bucket_low(m))
         .field("label", rcd_range(m)).end_object();
  w.key("buckets").begin_array();
  for (int b = 0; b < profile::kRcdBuckets; ++b)
    if (r.buckets[b])
      w.begin_object().field("low", profile::rcd_bucket_low(b)).field("label", rcd_range(b))
          .field("count", r.buckets[b]).end_object();
  w.end_array();
  w.end_object();
  w.field("ccprof", verdict(r));
}

class SetsViewImpl final : public View {
 public:
  std::string_view name() const override { return "sets"; }
  std::string_view summary() const override {
    return "accesses and misses per cache set, hot sets, CCProf's re-conflict distance";
  }

  void text(std::ostream& out, const ViewInput& in) const override {
    const profile::Profile& p = in.profile;
    const SetsView v = analysis::analyze_sets(p, in.analysis);
    out << "Cache sets (" << mode_name(p.meta.mode) << " mode; per-set numbers " << v.source
        << (v.source == std::string("counted") ? ": every access simulated"
            : v.source == std::string("estimated") ? ": replayed from the trace windows"
                                                   : ": from the sampled misses, when there are")
        << ")\n";
    if (!v.has_set_counts() && v.instructions.empty()) {
      out << (p.meta.mode == uint32_t(profile::Mode::Exact)
                  ? "\nThis profile has no per-set counts: it was recorded by an older build, or "
                    "with WHYMISS_SETS=0.\n"
                  : p.meta.mode == uint32_t(profile::Mode::Soft)
                  ? "\nThis profile has no per-set numbers: they come from its full-trace windows, "
                    "and it has none.\n"
                  : "\nThis profile has no per-set numbers: pmu mode does not gather them yet.\n");
      return;
    }
    for (const auto& lv : v.levels) {
      out << "\n" << lv.name << " (" << thousands(lv.sets) << " sets, " << ways_of(p, lv.level)
          << "): " << thousands(lv.accesses) << " accesses, " << thousands(lv.misses)
          << " misses on " << thousands(lv.sets_with_misses) << " of " << thousands(lv.rows)
          << " sets" << (lv.folded ? " (folded: set = index mod 65,536)" : "") << "\n";
      out << "  the hottest 1/8 of the sets take " << pct(lv.hottest_eighth_share)
          << " of the misses (12.5% when spread evenly)\n";
      if (!lv.hot.empty()) {
        out << "  hot sets (>= 4x the mean misses a set, >= 16 misses):\n";
        out << fmt("  %8s %14s %12s %7s  %s\n", "set", "accesses", "misses", "share",
                   "misses by kind");
        for (const auto& h : lv.hot) {
          std::string kinds;
          for (int k = 1; k < profile::kKinds; ++k)
            if (h.by_kind[k]) kinds += (kinds.empty() ? "" : ", ") + std::string(kMissKinds[k]) +
                                       " " + thousands(h.by_kind[k]);
          out << fmt("  %8u %14s %12s %7s  %s\n", h.set, thousands(h.accesses).c_str(),
                     thousands(h.misses).c_str(), pct(h.share).c_str(), kinds.c_str());
        }
      } else {
        out << "  no hot sets: no set has 4x the mean misses (and at least 16)\n";
      }
      // The histogram over the set index, in at most 16 rows.
      const size_t rows = std::min<size_t>(16, lv.bins.size());
      const size_t per = (lv.bins.size() + rows - 1) / rows;
      std::vector<analysis::SetBin> text_bins;
      for (size_t i = 0; i < lv.bins.size(); i += per) {
        analysis::SetBin b = lv.bins[i];
        for (size_t j = i + 1; j < i + per && j < lv.bins.size(); ++j) {
          b.last = lv.bins[j].last;
          b.accesses += lv.bins[j].accesses;
          b.misses += lv.bins[j].misses;
        }
        text_bins.push_back(b);
      }
      uint64_t most = 1;
      for (const auto& b : text_bins) most = std::max(most, b.misses);
      out << "  misses by set index:\n";
      for (const auto& b : text_bins) {
        const int len = int((b.misses * 40 + most - 1) / most);
        out << fmt("  %13s %12s  %s\n", (std::to_string(b.first) + "-" + std::to_string(b.last)).c_str(),
                   thousands(b.misses).c_str(), std::string(size_t(len), '#').c_str());
      }
    }
    out << "\nRe-conflict distance (CCProf, CGO'18): the L1 misses a thread takes between two of its "
           "misses\non one L1 set (" << thousands(v.l1_sets) << " sets), every kind. CCProf: "
           "\"conflict\" when >= 30% of a region's\ndistances are short (< 8: cf); evenly spread "
           "misses give distances near the set count.\n";
    if (v.instructions.empty()) {
      out << "  (no distances in this profile)\n";
      return;
    }
    if (!v.findings.empty()) {
      out << "  per finding (whymiss's kind at its level; distances of its instructions at L1):\n";
      for (const auto& rf : v.findings) {
        const auto& f = in.analysis.findings[rf.finding];
        out << fmt("  #%-3zu %-14s %-4s %9s cf %6s  median %-9s CCProf: %s\n", rf.finding + 1,
                   analysis::kind_name(f.kind), p.geometry.levels[size_t(f.level)].name.c_str(),
                   thousands(rf.rcd.pairs).c_str(), pct(rf.rcd.cf()).c_str(),
                   rcd_range(rf.rcd.median_bucket()).c_str(), verdict(rf.rcd));
      }
    }
    out << "  per instruction (most L1 misses first):\n";
    out << fmt("  %-28s %9s %6s %-7s %-11s %s\n", "where", "distances", "cf", "median", "CCProf",
               "whymiss: L1 kinds");
    for (const auto& ri : v.instructions) {
      // "function  file:line" in 28 columns: the function is shortened first, the place kept.
      const CodeLoc c = in.names.code(ri.ip);
      std::string place = c.file.empty() ? "" : basename(c.file) + ":" + std::to_string(c.line);
      std::string fn = c.function;
      const size_t room = place.size() + 2 < 28 ? 28 - place.size() - 2 : 0;
      if (fn.size() > room) fn = room > 3 ? fn.substr(0, room - 3) + "..." : "";
      std::string w = place.empty() ? c.function.substr(0, 28) : fn + "  " + place;
      if (w.size() > 28) w = w.substr(w.size() - 28);
      // The two biggest kinds (JSON has them all), to stay within 100 columns.
      int top[2] = {0, 0};
      for (int k = 1; k < profile::kKinds; ++k)
        if (ri.by_kind[k] > ri.by_kind[top[0]]) top[1] = top[0], top[0] = k;
        else if (ri.by_kind[k] > ri.by_kind[top[1]]) top[1] = k;
      std::string kinds;
      for (int k : top)
        if (k && ri.by_kind[k] && ri.l1_misses)
          kinds += (kinds.empty() ? "" : ", ") + std::string(kMissKinds[k]) + " " +
                   pct(double(ri.by_kind[k]) / double(ri.l1_misses));
      out << fmt("  %-28s %9s %6s %-7s %-11s %s\n", w.c_str(), thousands(ri.rcd.pairs).c_str(),
                 pct(ri.rcd.cf()).c_str(), rcd_range(ri.rcd.median_bucket()).c_str(),
                 verdict(ri.rcd), kinds.c_str());
    }
  }

  void json(JsonWriter& w, const ViewInput& in) const override {
    const profile::Profile& p = in.profile;
    const SetsView v = analysis::analyze_sets(p, in.analysis);
    w.field("source", v.source);
    w.key("levels").begin_array();
    for (const auto& lv : v.levels) {
      w.begin_object().field("level", lv.level).field("name", lv.name).field("sets", lv.sets)
          .field("folded", lv.folded).field("accesses", lv.accesses).field("misses", lv.misses)
          .field("sets_with_misses", lv.sets_with_misses)
          .field("hottest_eighth_share", lv.hottest_eighth_share, 4);
      w.key("hot_sets").begin_array();
      for (const auto& h : lv.hot) {
        w.begin_object().field("set", h.set).field("accesses", h.accesses)
            .field("misses", h.misses).field("share", h.share, 4);
        w.key("kinds").begin_object();
        for (int k = 1; k < profile::kKinds; ++k) w.field(kMissKinds[k], h.by_kind[k]);
        w.end_object().end_object();
      }
      w.end_array();
      w.key("histogram").begin_array();
      for (const auto& b : lv.bins)
        w.begin_object().field("first_set", b.first).field("last_set", b.last)
            .field("accesses", b.accesses).field("misses", b.misses).end_object();
      w.end_array();
      w.end_object();
    }
    w.end_array();
    w.key("rcd").begin_object();
    w.field("level", 0).field("l1_sets", v.l1_sets).field("short_below", analysis::kRcdShort)
        .field("conflict_cut", analysis::kRcdConflictCut, 2);
    w.key("findings").begin_array();
    for (const auto& rf : v.findings) {
      const auto& f = in.analysis.findings[rf.finding];
      w.begin_object().field("finding", rf.finding + 1).field("kind", analysis::kind_name(f.kind))
          .field("level", f.level);
      rcd_json(w, rf.rcd);
      w.end_object();
    }
    w.end_array();
    w.key("instructions").begin_array();
    for (const auto& ri : v.instructions) {
      const CodeLoc c = in.names.code(ri.ip);
      w.begin_object().field("ip", hex(ri.ip)).field("function", c.function).field("file", c.file)
          .field("line", c.line).field("l1_misses", ri.l1_misses);
      w.key("kinds").begin_object();
      for (int k = 1; k < profile::kKinds; ++k) w.field(kMissKinds[k], ri.by_kind[k]);
      w.end_object();
      rcd_json(w, ri.rcd);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
};

}  // namespace

const View& sets_view() {
  static const SetsViewImpl v;
  return v;
}

}  // namespace whymiss::report
