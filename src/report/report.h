// The profile report: header, totals by level and kind, and the analysis' findings, as text
// (readable at 100 columns) or JSON (schema_version 1, the contract other tools parse).
// Names of code and data come from a Namer, so the report knows nothing of ELF or DWARF.
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/types.h"
#include "model/profile.h"

namespace whymiss::report {

struct CodeLoc {
  std::string function;  // "??" when unknown
  std::string file;      // "" when unknown
  uint32_t line = 0;
};

struct DataName {
  std::string name;
  uint64_t start = 0, size = 0;
};

class Namer {
 public:
  virtual ~Namer() = default;
  virtual CodeLoc code(uint64_t ip) = 0;                      // innermost source frame
  // The inline chain at `ip`: the innermost (possibly inlined) function first, then each caller
  // it was inlined into, the out-of-line function last; each frame's line is the position inside
  // that function. Never empty. A namer that knows no inlining gives code(ip) alone.
  virtual std::vector<CodeLoc> chain(uint64_t ip) { return {code(ip)}; }
  virtual std::optional<DataName> global(uint64_t addr) = 0;  // a global or static variable
  virtual CodeLoc site(const profile::SiteRecord& s) = 0;     // the program's allocating frame
};

enum class Format { Text, Json, Cachegrind, Pprof, Html };

struct Options {
  Format format = Format::Text;
  size_t max_findings = 20;
  size_t max_instructions = 5;  // per finding
  size_t max_objects = 5;       // per finding
  size_t max_source_lines = 200;  // JSON "source_lines"
  size_t max_text_lines = 10;     // text and HTML: hottest source lines
};

// `types` names the data of the latent false sharing cases (analysis::NoTypes when there is no
// debug information to ask).
void write_report(std::ostream& out, const profile::Profile& p, const analysis::Analysis& a,
                  Namer& names, analysis::TypeOracle& types, const Options& o);

// The report as one self-contained HTML page (html.cpp): totals, charts, findings and the
// annotated hottest source lines; it loads nothing when opened.
void write_html(std::ostream& out, const profile::Profile& p, const analysis::Analysis& a,
                Namer& names, analysis::TypeOracle& types, const Options& o);
// The profile's accesses and misses per source line and function in cachegrind's output format
// (cachegrind.cpp), for cg_annotate and KCachegrind.
void write_cachegrind(std::ostream& out, const profile::Profile& p, Namer& names);
// The profile in pprof's format (gzipped profile.proto; pprof.cpp), for `go tool pprof` and
// the continuous-profiling services that ingest it. False when it could not be encoded.
bool write_pprof(std::ostream& out, const profile::Profile& p, Namer& names);

const char* mode_name(uint32_t mode);  // "exact", "soft", "pmu"

// `s` made safe to print on a terminal: control characters and bytes that are not UTF-8 are
// escaped (\n, \t, \e, \xHH; a backslash as \\), so that text from the program (its arguments,
// symbol names) can neither forge report lines nor send terminal codes.
std::string printable(std::string_view s);

}  // namespace whymiss::report
