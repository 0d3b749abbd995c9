// The list of views. A new view is a new file implementing report::View and one line here.
#include "report/view.h"

namespace whymiss::report {

// Each view file defines its accessor (one static instance).
const View& types_view();
const View& fields_view();
const View& flow_view();
const View& working_set_view();
const View& sets_view();

const std::vector<const View*>& views() {
  static const std::vector<const View*> all = {
      &types_view(),
      &fields_view(),
      &flow_view(),
      &working_set_view(),
      &sets_view(),
  };
  return all;
}

const View* find_view(std::string_view name) {
  for (const View* v : views())
    if (v->name() == name) return v;
  return nullptr;
}

std::string view_names() {
  std::string s;
  const auto& all = views();
  for (size_t i = 0; i < all.size(); ++i) {
    if (i) s += i + 1 == all.size() ? " or " : ", ";
    s += all[i]->name();
  }
  return s.empty() ? "(none)" : s;
}

void write_view(std::ostream& out, const View& v, const ViewInput& in, Format format) {
  if (format == Format::Json) {
    JsonWriter w(out);
    w.begin_object()
        .field("tool", "whymiss")
        .field("schema_version", 1)
        .field("view", v.name())
        .field("mode", mode_name(in.profile.meta.mode));
    v.json(w, in);
    w.end_object();
    return;
  }
  v.text(out, in);
}

}  // namespace whymiss::report
