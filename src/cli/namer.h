// The report's Namer backed by the symbolizer over the modules a profile recorded.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/profile.h"
#include "report/report.h"
#include "symbols/symbolizer.h"

namespace whymiss::cli {

class SymbolNamer : public report::Namer {
 public:
  // Modules that cannot be read are noted in warnings(); their addresses print as "??".
  explicit SymbolNamer(const profile::Profile& p);
  report::CodeLoc code(uint64_t ip) override;
  std::vector<report::CodeLoc> chain(uint64_t ip) override;
  std::optional<report::DataName> global(uint64_t addr) override;
  report::CodeLoc site(const profile::SiteRecord& s) override;
  // The return address in the program of the allocation call `s` records: its innermost frame
  // outside the allocator's plumbing (libc, libstdc++, the runtime); 0 if none.
  uint64_t site_frame(const profile::SiteRecord& s);
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::unique_ptr<symbols::Symbolizer> sym_;
  std::vector<std::string> warnings_;
};

}  // namespace whymiss::cli
