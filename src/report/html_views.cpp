// The HTML report's charts, one function per view (html_page.h). Today: the kinds of miss at
// each cache level. The analysis' other views (miss-ratio curves, set histograms, reuse
// distances, ...) each add a function here and an entry in views().
#include <sstream>

#include "analysis/mrc.h"
#include "report/common.h"
#include "report/html_page.h"
#include "report/json.h"
#include "report/sampled.h"

namespace whymiss::report::html {

const char* const kKindColours[profile::kKinds] = {"#999999", "#9e9e9e", "#4e79a7", "#e15759",
                                                   "#f28e2b", "#b07aa1"};
const char* const kKindLabels[profile::kKinds] = {"hit",      "compulsory",   "capacity",
                                                  "conflict", "true sharing", "false sharing"};

namespace {

uint64_t kind_total(const profile::CounterRecord& c, int k) { return c.by_kind[k][0] + c.by_kind[k][1]; }

// Per level, a stacked bar of its misses by kind, as shares of the level's misses (the levels'
// counts differ by orders of magnitude; the totals table above gives the counts).
void miss_kinds(Page& page, const profile::Profile& p, const analysis::Analysis&) {
  const size_t nlevels = std::min(p.counters.size(), p.geometry.levels.size());
  if (nlevels == 0) return;
  std::ostringstream cfg;
  {
    JsonWriter w(cfg, 0);
    w.begin_object().field("type", "bar");
    w.key("data").begin_object().key("labels").begin_array();
    for (size_t l = 0; l < nlevels; ++l) w.value(p.geometry.levels[l].name);
    w.end_array().key("datasets").begin_array();
    for (int k = 1; k < profile::kKinds; ++k) {
      w.begin_object().field("label", kKindLabels[k]).field("backgroundColor", kKindColours[k]);
      w.key("data").begin_array();
      for (size_t l = 0; l < nlevels; ++l) {
        uint64_t misses = 0;
        for (int j = 1; j < profile::kKinds; ++j) misses += kind_total(p.counters[l], j);
        w.value(misses ? 100.0 * double(kind_total(p.counters[l], k)) / double(misses) : 0.0, 2);
      }
      w.end_array().end_object();
    }
    w.end_array().end_object();
    w.key("options").begin_object().field("indexAxis", "y").field("maintainAspectRatio", false);
    w.key("scales").begin_object();
    w.key("x").begin_object().field("stacked", true).field("min", 0).field("max", 100);
    w.key("title").begin_object().field("display", true).field("text", "% of the level's misses").end_object();
    w.end_object();
    w.key("y").begin_object().field("stacked", true).end_object();
    w.end_object();
    w.key("plugins").begin_object().key("legend").begin_object().field("position", "bottom").end_object();
    w.end_object().end_object().end_object();
  }
  std::ostringstream& s = page.section("miss-kinds", "Misses by kind and level");
  s << "<p>What each level's misses are: compulsory (first touch), capacity (the data does not "
       "fit), conflict (too many lines map to one set), true and false sharing (another core "
       "wrote the line). Counts are in the totals table ["
    << esc(sampled::how(p)) << "].</p>\n";
  page.chart("miss_kinds", "Misses by kind at each cache level", cfg.str(),
             "Share of each level's misses by kind");
}

// The program's miss-ratio curve (analysis/mrc.h): miss ratio against cache size on a log axis,
// one line per line size, with the machine's level sizes marked in the caption.
void miss_ratio_curve(Page& page, const profile::Profile& p, const analysis::Analysis&) {
  std::vector<analysis::Mrc> curves;
  if (auto m = analysis::program_mrc(p)) curves.push_back(*m);
  if (curves.empty()) return;
  for (uint32_t l : analysis::other_mrc_lines(p))
    if (auto o = analysis::program_mrc(p, l)) curves.push_back(*o);
  const char* colours[] = {"#4e79a7", "#f28e2b", "#59a14f"};
  std::ostringstream cfg;
  {
    JsonWriter w(cfg, 0);
    w.begin_object().field("type", "line");
    w.key("data").begin_object().key("datasets").begin_array();
    for (size_t i = 0; i < curves.size(); ++i) {
      w.begin_object().field("label", std::to_string(curves[i].line) + "-byte lines" +
                                         (curves[i].how != curves[0].how ? " [" + curves[i].how + "]" : ""));
      w.field("borderColor", colours[i % 3]).field("backgroundColor", colours[i % 3]).field("pointRadius", 2);
      w.key("data").begin_array();
      for (const auto& pt : curves[i].points)
        w.begin_object().field("x", double(pt.size) / 1024.0, 3).field("y", 100.0 * pt.miss_ratio, 3).end_object();
      w.end_array().end_object();
    }
    w.end_array().end_object();
    w.key("options").begin_object().field("maintainAspectRatio", false).field("parsing", true);
    w.key("scales").begin_object();
    w.key("x").begin_object().field("type", "logarithmic");
    w.key("title").begin_object().field("display", true).field("text", "cache size (KiB, log scale)").end_object();
    w.end_object();
    w.key("y").begin_object().field("min", 0);
    w.key("title").begin_object().field("display", true).field("text", "miss ratio (%)").end_object();
    w.end_object().end_object();
    w.key("plugins").begin_object().key("legend").begin_object().field("position", "bottom").end_object();
    w.end_object().end_object().end_object();
  }
  std::string levels;
  for (const auto& l : p.geometry.levels) levels += (levels.empty() ? "" : ", ") + l.name + " " + std::to_string(l.size / 1024) + " KiB";
  std::ostringstream& s = page.section("mrc", "Miss ratio by cache size");
  s << "<p>The miss ratio a fully-associative LRU cache of each size would have had on this run's "
       "accesses, from their reuse distances [" << esc(curves[0].how) << "]. This machine: "
    << esc(levels) << ".</p>\n";
  page.chart("mrc", "Miss-ratio curve", cfg.str(), "Miss ratio against cache size");
}

}  // namespace

const std::vector<View>& views() {
  static const std::vector<View> v{miss_kinds, miss_ratio_curve};
  return v;
}

}  // namespace whymiss::report::html
