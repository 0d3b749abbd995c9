#include "cli/diff_cmd.h"

#include <cerrno>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "cli/args.h"
#include "cli/common.h"
#include "cli/namer.h"
#include "cli/output.h"
#include "model/profile.h"
#include "report/diff.h"

namespace whymiss::cli {
namespace {

const std::vector<OptionSpec> kDiffOpts = {
    {"format", 0, true}, {"output", 0, true}, {"force", 0, false}, {"help", 'h', false}};

}  // namespace

int diff_main(int argc, char** argv, std::ostream& out, std::ostream& err) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto a = parse_args(args, kDiffOpts);
  if (!a) return fail(err, a.error());
  if (a->has("help")) return diff_usage(out), 0;
  if (a->positional.size() != 2)
    return fail(err, "diff takes two profiles, BEFORE and AFTER, not " + std::to_string(a->positional.size()));
  report::DiffOptions o;
  if (const auto* f = a->get("format")) {
    if (*f == "json") o.format = report::Format::Json;
    else if (*f != "text") return fail(err, "unknown format '" + *f + "' (text or json)");
  }
  if (a->positional[0] == "-" && a->positional[1] == "-")
    return fail(err, "only one of the two profiles can come from standard input");
  auto before = read_analysable(a->positional[0]);
  if (!before) return fail(err, before.error());
  auto after = read_analysable(a->positional[1]);
  if (!after) return fail(err, after.error());
  const analysis::Analysis ab = analysis::analyze(*before), aa = analysis::analyze(*after);
  SymbolNamer nb(*before), na(*after);
  std::ostringstream text;
  report::write_diff(text, {*before, ab, nb, a->positional[0]}, {*after, aa, na, a->positional[1]}, o);
  if (const auto* path = a->get("output")) {
    if (auto st = write_output(*path, text.view(), {OutputKind::Report, a->has("force")}); !st)
      return fail(err, st.error());
    return 0;
  }
  errno = 0;
  out << text.view();
  out.flush();
  if (!out)
    return fail(err, std::string("cannot write the comparison") + (errno ? std::string(": ") + std::strerror(errno) : ""));
  return 0;
}

void diff_usage(std::ostream& out) {
  out << "usage: whymiss diff BEFORE AFTER [--format text|json] [--output FILE] [--force]\n"
         "Compares two profiles of one program (e.g. before and after a fix): misses per level,\n"
         "each finding's verdict (fixed, better, worse, new, same), and the source lines and heap\n"
         "allocation sites whose L1 misses changed most. Code and data are matched by name\n"
         "(function and line, allocation site), not by address.\n"
         "Exit status: 0, or 2 when a profile cannot be read or the output cannot be written.\n";
}

}  // namespace whymiss::cli
