#include "cli/type_oracle.h"

namespace whymiss::cli {

DwarfTypes::DwarfTypes(const profile::Profile& p, SymbolNamer& names) : names_(names) {
  std::vector<symbols::ModuleSpec> specs;
  for (const auto& m : p.modules) specs.push_back({m.path, m.rec.load_bias, m.rec.start, m.rec.end});
  reader_ = symbols::TypeReader::create(specs);
}

const analysis::DataType* DwarfTypes::convert(const symbols::TypeLayout* t) {
  if (t == nullptr) return nullptr;
  auto& slot = types_[t];
  if (!slot) {
    slot = std::make_unique<analysis::DataType>();
    slot->name = t->name;
    slot->size = t->size;
    for (const auto& m : t->members) slot->fields.push_back({m.name, m.offset, m.size});
  }
  return slot.get();
}

const analysis::DataType* DwarfTypes::heap_type(const profile::Profile& p,
                                                const profile::ObjectRecord& o) {
  if (o.site == profile::kNoSite || o.site >= p.sites.size()) return nullptr;
  const uint64_t ret = names_.site_frame(p.sites[o.site]);
  return convert(reader_->allocated_type(ret, o.size));
}

const analysis::DataType* DwarfTypes::global_type(uint64_t addr, uint64_t* start) {
  return convert(reader_->global_type(addr, start));
}

}  // namespace whymiss::cli
