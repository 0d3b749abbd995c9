#include "cli/common.h"

#include "analysis/estimate.h"

namespace whymiss::cli {

int fail(std::ostream& err, const std::string& sentence) {
  err << "whymiss: " << sentence << "\n";
  return 2;
}

Status make_analysable(profile::Profile& p, const std::string& name) {
  if (p.meta.mode == uint32_t(profile::Mode::Exact)) return Ok{};
  if (auto st = analysis::estimate(p); !st) return make_error(name + ": " + st.error());
  return Ok{};
}

Result<profile::Profile> read_analysable(const std::string& path) {
  auto p = profile::read_profile(path);
  if (!p) return p;
  if (auto st = make_analysable(*p, path == "-" ? std::string(profile::kStdinName) : path); !st)
    return make_error(st.error());
  return p;
}

}  // namespace whymiss::cli
