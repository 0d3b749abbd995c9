// Views: `whymiss report --view NAME`, a look at the profile from one side (data types, cache
// sets, ...) beside the default report. Each view is a file of its own in report/ that
// implements View; views.cpp lists them. A view writes text (readable at 100 columns) or the
// body of a JSON document whose envelope write_view() writes:
//   {"tool":"whymiss","schema_version":1,"view":NAME,"mode":"exact"|"soft"|"pmu", <body>}
// (docs/report.schema.json, $defs/view). Like the report, every number a view prints says how it
// was obtained: counted, sampled or modelled.
#pragma once
#include <ostream>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/types.h"
#include "model/profile.h"
#include "report/json.h"
#include "report/report.h"

namespace whymiss::report {

struct ViewInput {
  const profile::Profile& profile;
  const analysis::Analysis& analysis;
  Namer& names;
  analysis::TypeOracle& types;
  const Options& options;
};

class View {
 public:
  virtual ~View() = default;
  virtual std::string_view name() const = 0;     // what --view takes: "types", "sets", ...
  virtual std::string_view summary() const = 0;  // one line, for usage and errors
  virtual void text(std::ostream& out, const ViewInput& in) const = 0;
  // The body: keys and values written into the envelope object (which is open).
  virtual void json(JsonWriter& w, const ViewInput& in) const = 0;
};

// Every view, in the order usage lists them.
const std::vector<const View*>& views();
const View* find_view(std::string_view name);  // nullptr when there is none of that name
// "a, b or c": the names of all views, for an error sentence.
std::string view_names();

// The view in `format` (Text or Json; the caller refuses the others).
void write_view(std::ostream& out, const View& v, const ViewInput& in, Format format);

}  // namespace whymiss::report
