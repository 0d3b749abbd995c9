// The HTML report's charts, one function per view (html_page.h). Today: the kinds of miss at
// each cache level. The analysis' other views (miss-ratio curves, set histograms, reuse
// distances, ...) each add a function here and an entry in views().
#include <sstream>

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

}  // namespace

const std::vector<View>& views() {
  static const std::vector<View> v{miss_kinds};
  return v;
}

}  // namespace whymiss::report::html
