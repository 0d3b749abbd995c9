#include "cli/namer.h"

namespace whymiss::cli {
namespace {

// Frames inside these are the allocator's plumbing, not the program's allocation site.
bool is_plumbing(const std::string& module) {
  size_t s = module.rfind('/');
  std::string base = s == std::string::npos ? module : module.substr(s + 1);
  for (const char* p : {"libc.so", "libc-", "libstdc++", "libwhymiss-rt", "ld-linux", "libgcc"})
    if (base.rfind(p, 0) == 0) return true;
  return false;
}

report::CodeLoc to_loc(const symbols::SourceFrame& f) {
  return {std::string(f.function), std::string(f.file), f.line};
}

}  // namespace

SymbolNamer::SymbolNamer(const profile::Profile& p) : sym_(symbols::Symbolizer::create()) {
  for (const auto& m : p.modules) {
    auto st = sym_->add_module({m.path, m.rec.load_bias, m.rec.start, m.rec.end});
    if (!st) warnings_.push_back(st.error());
  }
}

report::CodeLoc SymbolNamer::code(uint64_t ip) { return to_loc(sym_->resolve(ip).front()); }

std::vector<report::CodeLoc> SymbolNamer::chain(uint64_t ip) {
  std::vector<report::CodeLoc> v;
  for (const auto& f : sym_->resolve(ip)) v.push_back(to_loc(f));
  return v;
}

std::optional<report::DataName> SymbolNamer::global(uint64_t addr) {
  const symbols::GlobalVar* g = sym_->global_at(addr);
  if (!g) return std::nullopt;
  std::string name = g->name;
  if (!g->type.empty()) name += " (" + g->type + ")";
  return report::DataName{name, g->start, g->size};
}

uint64_t SymbolNamer::site_frame(const profile::SiteRecord& s) {
  for (uint32_t i = 0; i < s.depth && i < uint32_t(profile::kSiteFrames); ++i) {
    if (!s.frames[i]) continue;
    if (is_plumbing(sym_->module_of(s.frames[i] - 1))) continue;
    return s.frames[i];
  }
  return s.depth ? s.frames[0] : 0;
}

report::CodeLoc SymbolNamer::site(const profile::SiteRecord& s) {
  // Frames are return addresses: resolve the call instruction (address - 1).
  const uint64_t ret = site_frame(s);
  if (ret) return to_loc(sym_->resolve(ret - 1).front());
  return {"??", "", 0};
}

}  // namespace whymiss::cli
