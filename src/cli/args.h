// A small command-line parser shared by the whymiss subcommands.
//
// Accepts long options as `--name value` or `--name=value`, short options as `-o value`, `-ovalue`
// or bundled flags (`-hv`), `--` to end options, and positional arguments anywhere. A lone `-`
// is positional (it usually means stdin). Options may repeat; get() returns the last value.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/result.h"

namespace whymiss::cli {

struct OptionSpec {
  std::string name;     // long name without dashes, e.g. "cache"
  char short_name = 0;  // e.g. 'o'; 0 for none
  bool takes_value = true;
};

struct ParsedArgs {
  std::vector<std::pair<std::string, std::string>> options;  // (long name, value) in order
  std::vector<std::string> positional;

  bool has(std::string_view name) const;
  // The last value given for `name`, or nullptr if absent. Flags have the value "".
  const std::string* get(std::string_view name) const;
};

// Parses args (without the program or command name). Errors are one sentence, such as
// "unknown option '--frobnicate'" or "option '--cache' needs a value".
Result<ParsedArgs> parse_args(const std::vector<std::string>& args,
                              const std::vector<OptionSpec>& specs);

}  // namespace whymiss::cli
