#include "cli/args.h"

namespace whymiss::cli {

bool ParsedArgs::has(std::string_view name) const {
  return get(name) != nullptr;
}

const std::string* ParsedArgs::get(std::string_view name) const {
  for (auto it = options.rbegin(); it != options.rend(); ++it) {
    if (it->first == name) return &it->second;
  }
  return nullptr;
}

Result<ParsedArgs> parse_args(const std::vector<std::string>& args,
                              const std::vector<OptionSpec>& specs) {
  auto find_long = [&](std::string_view name) -> const OptionSpec* {
    for (const OptionSpec& s : specs) {
      if (s.name == name) return &s;
    }
    return nullptr;
  };
  auto find_short = [&](char c) -> const OptionSpec* {
    for (const OptionSpec& s : specs) {
      if (s.short_name != 0 && s.short_name == c) return &s;
    }
    return nullptr;
  };

  ParsedArgs out;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.size() < 2 || a[0] != '-') {
      out.positional.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    if (a[1] == '-') {
      std::string_view body = std::string_view(a).substr(2);
      size_t eq = body.find('=');
      std::string_view name = body.substr(0, eq);
      const OptionSpec* spec = find_long(name);
      if (!spec) return make_error("unknown option '--" + std::string(name) + "'");
      if (!spec->takes_value) {
        if (eq != std::string_view::npos) {
          return make_error("option '--" + spec->name + "' does not take a value");
        }
        out.options.emplace_back(spec->name, "");
      } else if (eq != std::string_view::npos) {
        out.options.emplace_back(spec->name, std::string(body.substr(eq + 1)));
      } else if (i + 1 < args.size()) {
        out.options.emplace_back(spec->name, args[++i]);
      } else {
        return make_error("option '--" + spec->name + "' needs a value");
      }
      continue;
    }
    // Short options: flags may be bundled; one taking a value consumes the rest or the next arg.
    for (size_t k = 1; k < a.size(); ++k) {
      const OptionSpec* spec = find_short(a[k]);
      if (!spec) {
        return make_error("unknown option '-" + std::string(1, a[k]) + "'" +
                          (k > 1 ? " in '" + a + "'" : std::string()));
      }
      if (!spec->takes_value) {
        out.options.emplace_back(spec->name, "");
        continue;
      }
      if (k + 1 < a.size()) {
        out.options.emplace_back(spec->name, a.substr(k + 1));
      } else if (i + 1 < args.size()) {
        out.options.emplace_back(spec->name, args[++i]);
      } else {
        return make_error("option '-" + std::string(1, a[k]) + "' needs a value");
      }
      break;
    }
  }
  return out;
}

}  // namespace whymiss::cli
