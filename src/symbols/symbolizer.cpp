#include "symbols/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <unordered_map>

#include "symbols/dwarf_util.h"

namespace whymiss::symbols {
namespace {

// Offline session: modules come from files we are told about, never from a live process.
// dwfl_standard_find_debuginfo finds separate debug info by build-id and .gnu_debuglink
// (and asks debuginfod if the user has DEBUGINFOD_URLS set).
const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

// An ELF function symbol; `name` points into libelf's string table, demangled only when used.
struct FunctionSymbol {
  uint64_t start = 0;
  uint64_t size = 0;  // assembly without .size: up to the end of its section
  const char* name = nullptr;
  int rank = 0;
};

struct ModuleEntry {
  ModuleSpec spec;
  Dwfl_Module* mod = nullptr;  // null: unreadable, remembered for module_of() only
  bool types_done = false;     // DWARF variable types attached to this module's globals
  // Sorted by start, one per address. dwfl_module_addrinfo scans the whole symbol table per
  // call (~100 µs for libstdc++), so the fallback uses this instead.
  std::vector<FunctionSymbol> functions;
};

struct GlobalEntry {
  GlobalVar var;
  size_t module = 0;  // index into Impl::modules
  int rank = 0;       // among aliases at one address, lower is the better name
};

// Prefer "environ" over "__environ", then global over weak over local binding.
int alias_rank(const char* name, unsigned char binding) {
  int underscores = 0;
  while (name[underscores] == '_') ++underscores;
  int bind = binding == STB_GLOBAL ? 0 : binding == STB_WEAK ? 1 : 2;
  return underscores * 4 + bind;
}

// ELF symbol name for display: version suffix ("environ@@GLIBC_2.2.5" in a .symtab) cut,
// then demangled.
std::string display_name(const char* name) {
  const char* at = std::strchr(name, '@');
  return at == nullptr ? demangle(name) : demangle(std::string(name, at).c_str());
}

// Bytes from `addr` to the end of its section: the most a sizeless (assembly) symbol covers;
// nearer symbols after it take over in symbol_name() anyway.
uint64_t rest_of_section(Dwfl_Module* mod, uint64_t addr) {
  Dwarf_Addr offset = addr, bias = 0;
  Elf_Scn* scn = dwfl_module_address_section(mod, &offset, &bias);
  GElf_Shdr shdr;
  if (scn == nullptr || gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_size <= offset) return 1;
  return shdr.sh_size - offset;
}

std::string symbol_name(const ModuleEntry& m, uint64_t ip) {
  auto it = std::upper_bound(m.functions.begin(), m.functions.end(), ip,
                             [](uint64_t a, const FunctionSymbol& f) { return a < f.start; });
  if (it == m.functions.begin()) return "";
  const FunctionSymbol& f = *std::prev(it);
  if (ip - f.start >= f.size) return "";
  return display_name(f.name);
}

}  // namespace

struct Symbolizer::Impl {
  Dwfl* dwfl = nullptr;
  std::vector<ModuleEntry> modules;
  std::unordered_map<uint64_t, std::vector<SourceFrame>> cache;
  std::vector<GlobalEntry> globals;  // sorted by start once `globals_sorted`
  std::vector<uint64_t> max_end;     // max_end[i] = max(start + size) over globals[0..i]
  bool globals_sorted = true;
  internal::StringPool strings;  // backs every SourceFrame's views
  internal::FunctionFinder functions{&strings};
  internal::CuFinder cus;

  ~Impl() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }

  void read_symbols(size_t module_index);
  void sort_globals();
  void attach_types(size_t module_index);
  std::vector<SourceFrame> compute(uint64_t ip);
};

std::string demangle(const char* name) {
  if (name == nullptr) return "";
  if (name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (out == nullptr) return name;
  std::string result = status == 0 ? out : name;
  std::free(out);
  return result;
}

Symbolizer::Symbolizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Symbolizer::~Symbolizer() = default;

std::unique_ptr<Symbolizer> Symbolizer::create() {
  auto impl = std::make_unique<Impl>();
  impl->dwfl = dwfl_begin(&kCallbacks);  // null only when out of memory: all lookups say "??"
  return std::unique_ptr<Symbolizer>(new Symbolizer(std::move(impl)));
}

Status Symbolizer::add_module(const ModuleSpec& m) {
  Impl& s = *impl_;
  ModuleEntry entry;
  entry.spec = m;
  std::string why;
  if (s.dwfl == nullptr) {
    why = "libdw could not start a session";
  } else {
    dwfl_report_begin_add(s.dwfl);
    // add_p_vaddr: the bias is added to the ELF's own addresses, exactly dlpi_addr's meaning.
    // libdwfl ignores the bias for ET_EXEC, which is what a non-PIE executable needs.
    entry.mod = dwfl_report_elf(s.dwfl, m.path.c_str(), m.path.c_str(), -1, m.load_bias, true);
    if (entry.mod == nullptr) why = dwfl_errmsg(-1);
    dwfl_report_end(s.dwfl, nullptr, nullptr);
  }
  if (entry.mod != nullptr && entry.spec.end <= entry.spec.start) {
    Dwarf_Addr lo = 0, hi = 0;
    dwfl_module_info(entry.mod, nullptr, &lo, &hi, nullptr, nullptr, nullptr, nullptr);
    entry.spec.start = lo;
    entry.spec.end = hi;
  }
  s.modules.push_back(std::move(entry));
  s.cache.clear();  // a new module can answer addresses that were "??" before
  if (s.modules.back().mod != nullptr) s.read_symbols(s.modules.size() - 1);
  if (!why.empty()) {
    return make_error("cannot read symbols from " + m.path + " (" + why +
                      "); its addresses stay unresolved");
  }
  return Ok{};
}

void Symbolizer::Impl::read_symbols(size_t module_index) {
  ModuleEntry& m = modules[module_index];
  void** userdata = nullptr;  // lets compute() map a Dwfl_Module back to its entry
  dwfl_module_info(m.mod, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  if (userdata != nullptr) *userdata = reinterpret_cast<void*>(module_index + 1);

  int n = dwfl_module_getsymtab(m.mod);  // .symtab (own or from debug info), else .dynsym
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr = 0;
    GElf_Word shndx = 0;
    const char* name = dwfl_module_getsym_info(m.mod, i, &sym, &addr, &shndx, nullptr, nullptr);
    if (name == nullptr || name[0] == '\0') continue;
    if (shndx == SHN_UNDEF || shndx == SHN_ABS || shndx == static_cast<GElf_Word>(-1)) continue;
    int type = GELF_ST_TYPE(sym.st_info);
    int rank = alias_rank(name, GELF_ST_BIND(sym.st_info));
    if (type == STT_FUNC || type == STT_GNU_IFUNC) {
      m.functions.push_back(FunctionSymbol{addr, sym.st_size, name, rank});
      if (sym.st_size == 0) m.functions.back().size = rest_of_section(m.mod, addr);
      continue;
    }
    // STT_TLS is a different type, so thread-locals (no single address) are excluded here.
    if (type != STT_OBJECT || sym.st_size == 0) continue;
    GlobalEntry g;
    g.var.name = display_name(name);
    g.var.start = addr;
    g.var.size = sym.st_size;
    g.var.module = m.spec.path;
    g.module = module_index;
    g.rank = rank;
    globals.push_back(std::move(g));
  }
  globals_sorted = false;

  std::sort(m.functions.begin(), m.functions.end(), [](const auto& a, const auto& b) {
    return a.start != b.start ? a.start < b.start : a.rank < b.rank;
  });
  auto last = std::unique(m.functions.begin(), m.functions.end(),
                          [](const auto& a, const auto& b) { return a.start == b.start; });
  m.functions.erase(last, m.functions.end());
}

void Symbolizer::Impl::sort_globals() {
  // Same start: larger first so the backward scan in global_at() meets the inner one first;
  // then the best alias first, and exact duplicates (aliases) collapse onto it.
  std::sort(globals.begin(), globals.end(), [](const GlobalEntry& a, const GlobalEntry& b) {
    if (a.var.start != b.var.start) return a.var.start < b.var.start;
    if (a.var.size != b.var.size) return a.var.size > b.var.size;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.var.name < b.var.name;
  });
  auto last = std::unique(globals.begin(), globals.end(), [](const auto& a, const auto& b) {
    return a.var.start == b.var.start && a.var.size == b.var.size;
  });
  globals.erase(last, globals.end());
  max_end.resize(globals.size());
  uint64_t running = 0;
  for (size_t i = 0; i < globals.size(); ++i) {
    running = std::max(running, globals[i].var.start + globals[i].var.size);
    max_end[i] = running;
  }
  globals_sorted = true;
}

void Symbolizer::Impl::attach_types(size_t module_index) {
  ModuleEntry& m = modules[module_index];
  m.types_done = true;
  std::unordered_map<uint64_t, std::string> types;
  internal::collect_variable_types(m.mod, &types);
  if (types.empty()) return;
  for (GlobalEntry& g : globals) {
    if (g.module != module_index) continue;
    auto it = types.find(g.var.start);
    if (it != types.end()) g.var.type = it->second;
  }
}

const GlobalVar* Symbolizer::global_at(uint64_t addr) {
  Impl& s = *impl_;
  if (!s.globals_sorted) s.sort_globals();
  auto it = std::upper_bound(s.globals.begin(), s.globals.end(), addr,
                             [](uint64_t a, const GlobalEntry& g) { return a < g.var.start; });
  for (size_t j = static_cast<size_t>(it - s.globals.begin()); j-- > 0;) {
    if (s.max_end[j] <= addr) break;  // nothing at or before j reaches addr
    GlobalEntry& g = s.globals[j];
    if (addr < g.var.start + g.var.size) {
      if (!s.modules[g.module].types_done) s.attach_types(g.module);
      return &g.var;
    }
  }
  return nullptr;
}

std::string Symbolizer::module_of(uint64_t ip) const {
  for (const ModuleEntry& m : impl_->modules) {
    if (ip >= m.spec.start && ip < m.spec.end) return m.spec.path;
  }
  return "";
}

const std::vector<SourceFrame>& Symbolizer::resolve(uint64_t ip) {
  auto [it, inserted] = impl_->cache.try_emplace(ip);
  if (inserted) it->second = impl_->compute(ip);
  return it->second;
}

std::vector<SourceFrame> Symbolizer::Impl::compute(uint64_t ip) {
  static constexpr std::string_view kUnknown = "??";
  Dwfl_Module* mod = dwfl != nullptr ? dwfl_addrmodule(dwfl, ip) : nullptr;
  if (mod == nullptr) return {SourceFrame{kUnknown, "", 0}};

  // Not dwfl_module_addrdie / dwfl_module_getsrc: they find no CU without .debug_aranges,
  // which Clang does not emit (see CuFinder).
  Dwarf_Addr bias = 0;
  Dwarf_Die* cu = cus.find(mod, ip, &bias);

  // The line table gives the innermost position; each inlined call's DW_AT_call_file/line
  // gives the position in the function one level out.
  const char* file = nullptr;
  uint32_t line = 0;
  if (Dwarf_Line* l = cu != nullptr ? dwarf_getsrc_die(cu, ip - bias) : nullptr) {
    int ln = 0;
    file = dwarf_linesrc(l, nullptr, nullptr);
    line = dwarf_lineno(l, &ln) == 0 && ln > 0 ? static_cast<uint32_t>(ln) : 0;
  }
  auto here = [&](std::string_view function) {
    return SourceFrame{function, strings.intern(file != nullptr ? file : ""), line};
  };

  std::vector<SourceFrame> frames;
  bool outermost_is_inlined = false;
  if (cu != nullptr) {
    std::vector<Dwarf_Die> chain = functions.scopes(cu, ip - bias);
    Dwarf_Files* files = nullptr;
    size_t nfiles = 0;
    if (chain.size() > 1 && dwarf_getsrcfiles(cu, &files, &nfiles) != 0) files = nullptr;
    for (Dwarf_Die& die : chain) {
      const bool inlined = dwarf_tag(&die) == DW_TAG_inlined_subroutine;
      // An inlined wrapper marked artificial (__attribute__((artificial)): glibc's fortify
      // wrappers, whymiss-cc's gcc_memops.h) is no frame of its own: its accesses are its
      // caller's, at the call's line.
      if (inlined && &die != &chain.back() && internal::is_artificial(&die)) {
        internal::call_site(&die, files, nfiles, &file, &line);
        continue;
      }
      frames.push_back(here(functions.name(&die, cu)));
      outermost_is_inlined = inlined;
      if (outermost_is_inlined) internal::call_site(&die, files, nfiles, &file, &line);
    }
  }
  // No DWARF function (no debug info, assembly, or a chain cut short): the ELF symbol names
  // the out-of-line function.
  if (frames.empty() || outermost_is_inlined || frames.back().function.empty()) {
    void** userdata = nullptr;
    dwfl_module_info(mod, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    auto index = userdata != nullptr ? reinterpret_cast<uintptr_t>(*userdata) : 0;
    std::string_view name = index != 0 ? strings.intern(symbol_name(modules[index - 1], ip)) : "";
    if (frames.empty() || outermost_is_inlined) {
      frames.push_back(here(name));
    } else {
      frames.back().function = name;
    }
  }
  for (SourceFrame& f : frames) {
    if (f.function.empty()) f.function = kUnknown;
  }
  return frames;
}

}  // namespace whymiss::symbols
