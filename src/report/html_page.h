// The HTML report's page under construction (html.cpp): its sections in order, each with a table
// of contents entry, and the charts they hold. A chart is a <canvas> plus a Chart.js
// configuration given as JSON data, never as code: the page's one script (written here, not from
// the profile) reads the configurations and draws them with the embedded Chart.js.
//
// Views (html_views.cpp) add one section each through kViews; a new view is a new function
// there. Internal to the report library.
#pragma once
#include <deque>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "model/profile.h"
#include "report/report.h"

namespace whymiss::report::html {

// `s` as HTML text or attribute value: & < > " ' as entities; control characters other than tab
// and newline as U+FFFD. Use it on everything that comes from the program or the profile.
std::string esc(std::string_view s);
// printable(s) (report.h), then esc: names and arguments shown as the text report shows them.
std::string text(std::string_view s);

class Page {
 public:
  // Starts a section with a heading and an entry in the table of contents; `id` is a fixed
  // identifier chosen by the report (letters, digits, '-'), never data.
  std::ostringstream& section(const std::string& id, const std::string& title);
  // A chart in the current section: `config_json` is a Chart.js configuration (type, data,
  // options) written with JsonWriter; `caption` is HTML (escape data in it).
  void chart(const std::string& id, const std::string& label, const std::string& config_json,
             const std::string& caption);
  // The whole document: head, styles, contents, sections, chart data and scripts.
  void write(std::ostream& out, const std::string& title) const;

 private:
  struct Section {
    std::string id, title;
    std::ostringstream body;
  };
  std::deque<Section> sections_;  // references to a section stay valid as others are added
  std::vector<std::pair<std::string, std::string>> charts_;  // id, configuration
};

// One chart view: adds its section to the page when the profile has what it shows.
using View = void (*)(Page& page, const profile::Profile& p, const analysis::Analysis& a);
// The views in the order they appear, after the totals (html_views.cpp).
const std::vector<View>& views();

// Colours of the miss kinds (index as profile kinds; 0, hits, unused), shared by the charts
// and the tables' legends.
extern const char* const kKindColours[profile::kKinds];
extern const char* const kKindLabels[profile::kKinds];

}  // namespace whymiss::report::html
