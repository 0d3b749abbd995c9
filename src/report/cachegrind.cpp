// The cachegrind output format: a header (desc:, cmd:, events:), then per source file (fl=) and
// function (fn=) one line per source line: "LINE COUNT COUNT ...", in the order of `events:`,
// and a closing summary: of the totals. Events here: data reads and writes, misses per cache
// level, and L1 misses per kind. Counts are the profile's (exact: counted; sampled modes: the
// estimate, scaled to the traced accesses: the desc: line says which).
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "report/common.h"
#include "report/report.h"

namespace whymiss::report {
namespace {

// Event names are one token each (no spaces): level names come from the geometry.
std::string token(const std::string& s) {
  std::string t;
  for (char c : s) t += (c == ' ' || c == '\t' || c == '\n' || c == '\r') ? '_' : c;
  return t.empty() ? "?" : t;
}

// A file or function name on one line (the format has no escapes).
std::string one_line(const std::string& s) {
  std::string t;
  for (char c : s) t += (c == '\n' || c == '\r') ? ' ' : c;
  return t;
}

}  // namespace

void write_cachegrind(std::ostream& out, const profile::Profile& p, Namer& names) {
  const size_t nlevels = std::min<size_t>(p.geometry.levels.size(), profile::kLevels);
  for (size_t l = 0; l < nlevels; ++l) {
    const auto& g = p.geometry.levels[l];
    out << "desc: " << one_line(g.name) << " cache: " << g.size << " B, " << g.line << " B, " << g.ways
        << "-way associative (simulated by whymiss)\n";
  }
  out << "desc: counts: "
      << (p.meta.mode == uint32_t(profile::Mode::Exact) ? "counted by simulating every access (whymiss exact mode)"
                                                          : "estimated from samples (whymiss, not exact)")
      << "\n";
  out << "cmd: " << one_line(p.command) << "\n";
  const char* kinds[] = {"", "comp", "cap", "conf", "true", "false"};
  out << "events: Dr Dw";
  for (size_t l = 0; l < nlevels; ++l) out << " " << token(p.geometry.levels[l].name) << "m";
  for (int k = 1; k < profile::kKinds; ++k) out << " " << token(nlevels ? p.geometry.levels[0].name : "L1") << kinds[k];
  out << "\n";
  // Rows grouped by file, then function, lines ascending.
  std::map<std::tuple<std::string, std::string, uint32_t>, const SourceLine*> rows;
  const std::vector<SourceLine> lines = source_lines(p, names);
  for (const SourceLine& sl : lines) {
    const CodeLoc& c = sl.chain.back();
    rows[{c.file.empty() ? "???" : c.file, c.function, c.line}] = &sl;
  }
  std::vector<uint64_t> total(2 + nlevels + profile::kKinds - 1, 0);
  std::string file, fn;
  for (const auto& [key, sl] : rows) {
    const auto& [f, func, line] = key;
    if (f != file) out << "fl=" << one_line(f) << "\n", file = f, fn.clear();
    if (func != fn) out << "fn=" << one_line(func) << "\n", fn = func;
    std::vector<uint64_t> v{sl->accesses[0], sl->accesses[1]};
    for (size_t l = 0; l < nlevels; ++l) v.push_back(sl->misses[l][0]);
    for (int k = 1; k < profile::kKinds; ++k) v.push_back(sl->l1_kinds[k]);
    out << line;
    for (size_t i = 0; i < v.size(); ++i) out << " " << v[i], total[i] += v[i];
    out << "\n";
  }
  out << "summary:";
  for (uint64_t t : total) out << " " << t;
  out << "\n";
}

}  // namespace whymiss::report
