#include "report/unseen.h"

#include <cstdio>

#include "report/report.h"

namespace whymiss::report::unseen {
namespace {

constexpr size_t kNamed = 5;  // modules named in a sentence; the rest are summed

std::string basename(const std::string& f) {
  size_t s = f.rfind('/');
  return s == std::string::npos ? f : f.substr(s + 1);
}

// Whole percent; "<1%" and ">99%" for shares that would round to 0% or 100% but are not.
std::string pct(double f) {
  if (f > 0 && f < 0.005) return "<1%";
  if (f < 1 && f >= 0.995) return ">99%";
  char b[16];
  std::snprintf(b, sizeof b, "%.0f%%", 100 * f);
  return b;
}

std::string name(const analysis::ModuleTime& m) {
  if (m.path.empty()) return "code outside every loaded module";
  std::string n = printable(basename(m.path));
  if (m.kind == analysis::CodeKind::Unreadable) n += ", whose file could not be read";
  return n;
}

// "libz.so.1 (91%), libc.so.6 (2%, partly seen: ...), and 3 more (1%)"
std::string module_list(const analysis::UnseenWork& u) {
  std::string s;
  double rest = 0;
  size_t more = 0;
  for (size_t i = 0; i < u.modules.size(); ++i) {
    const auto& m = u.modules[i];
    if (i >= kNamed) {
      rest += m.share;
      ++more;
      continue;
    }
    if (!s.empty()) s += ", ";
    s += name(m) + " (" + pct(m.share);
    if (m.partly_seen)
      s += "; partly seen: its memcpy/memset/memmove called from instrumented code are simulated, "
           "its other functions are not";
    s += ")";
  }
  if (more) s += ", and " + std::to_string(more) + " more (" + pct(rest) + ")";
  return s;
}

std::string how(const analysis::UnseenWork& u) {
  char b[160];
  std::snprintf(b, sizeof b, "sampled: %llu samples, one per %.3g ms of a thread's CPU time",
                (unsigned long long)u.samples, double(u.period_ns) / 1e6);
  std::string s = b;
  if (u.whymiss_samples) s += ", " + std::to_string(u.whymiss_samples) + " more in whymiss's runtime, not counted";
  if (u.dropped) s += ", " + std::to_string(u.dropped) + " lost";
  if (u.unsampled_threads) s += ", " + std::to_string(u.unsampled_threads) + " threads unsampled";
  return s;
}

}  // namespace

std::string warning(const analysis::UnseenWork& u) {
  if (!u.measured || !u.warn) return "";
  const bool one = u.modules.size() == 1;
  return pct(u.unseen_share) + " of the program's CPU time ran in code whymiss-cc did not instrument: " +
         module_list(u) + " — " + (one ? "its" : "their") +
         " memory accesses were not simulated, so the counts and findings below leave " +
         (one ? "it" : "them") + " out; rebuild " + (one ? "that library" : "those libraries") +
         " with whymiss-cc, or build the program without it and use soft mode (`whymiss run --mode soft`) [" +
         how(u) + "]";
}

void text_first(std::ostream& out, const analysis::UnseenWork& u) {
  if (std::string w = warning(u); !w.empty()) out << "warning: " << w << "\n";
}

void text_header(std::ostream& out, const analysis::UnseenWork& u) {
  if (!u.measured || u.warn) return;
  if (!u.enough) {
    out << "cpu time: too few samples to tell how much ran outside instrumented code [" << how(u) << "]\n";
    return;
  }
  out << "cpu time: " << pct(1 - u.unseen_share) << " of the program's CPU time ran in instrumented code";
  if (!u.modules.empty()) out << "; outside it: " << module_list(u);
  out << " [" << how(u) << "]\n";
}

void json(JsonWriter& w, const analysis::UnseenWork& u) {
  if (!u.measured) return;
  w.key("cpu_time").begin_object();
  w.field("how", "sampled").field("period_ns", u.period_ns).field("samples", u.samples);
  w.field("whymiss_samples", u.whymiss_samples).field("lost_samples", u.dropped);
  w.field("unsampled_threads", u.unsampled_threads);
  w.field("enough_samples", u.enough);
  w.field("uninstrumented_share", u.unseen_share, 4);
  w.field("warning", u.warn);
  if (u.warn) w.field("message", warning(u));
  w.key("uninstrumented_modules").begin_array();
  for (const auto& m : u.modules) {
    w.begin_object().field("module", m.path.empty() ? std::string() : basename(m.path));
    w.field("path", m.path).field("samples", m.samples).field("share", m.share, 4);
    w.field("readable", m.kind != analysis::CodeKind::Unreadable).field("partly_seen", m.partly_seen);
    w.end_object();
  }
  w.end_array().end_object();
}

}  // namespace whymiss::report::unseen
