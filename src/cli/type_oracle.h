// The TypeOracle the cli hands to the analysis and the views: DWARF types through
// symbols::TypeReader, over the modules the profile recorded.
#pragma once
#include <memory>
#include <unordered_map>

#include "analysis/types.h"
#include "cli/namer.h"
#include "model/profile.h"
#include "symbols/data_types.h"

namespace whymiss::cli {

class DwarfTypes : public analysis::TypeOracle {
 public:
  DwarfTypes(const profile::Profile& p, SymbolNamer& names);
  const analysis::DataType* heap_type(const profile::Profile& p,
                                      const profile::ObjectRecord& o) override;
  const analysis::DataType* global_type(uint64_t addr, uint64_t* start) override;

 private:
  const analysis::DataType* convert(const symbols::TypeLayout* t);
  SymbolNamer& names_;
  std::unique_ptr<symbols::TypeReader> reader_;
  std::unordered_map<const symbols::TypeLayout*, std::unique_ptr<analysis::DataType>> types_;
};

}  // namespace whymiss::cli
