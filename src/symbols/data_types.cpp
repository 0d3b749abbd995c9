#include "symbols/data_types.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <unordered_map>

#include "symbols/dwarf_util.h"

namespace whymiss::symbols {
namespace {

const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

constexpr int kMaxDepth = 32;

Dwarf_Die* type_of(Dwarf_Die* die, Dwarf_Die* mem) {
  Dwarf_Attribute a;
  return dwarf_formref_die(dwarf_attr_integrate(die, DW_AT_type, &a), mem);
}

// Through typedefs and qualifiers to the type that has the layout (null: void).
Dwarf_Die* strip(Dwarf_Die* t, Dwarf_Die* mem) {
  for (int i = 0; t != nullptr && i < kMaxDepth; ++i) {
    switch (dwarf_tag(t)) {
      case DW_TAG_typedef:
      case DW_TAG_const_type:
      case DW_TAG_volatile_type:
      case DW_TAG_restrict_type:
      case DW_TAG_atomic_type:
        t = type_of(t, mem);
        break;
      default:
        return t;
    }
  }
  return nullptr;
}

// Through qualifiers only, so a typedef's name is kept as the program spells the type.
Dwarf_Die* unqualified(Dwarf_Die* t, Dwarf_Die* mem) {
  for (int i = 0; t != nullptr && i < kMaxDepth; ++i) {
    switch (dwarf_tag(t)) {
      case DW_TAG_const_type:
      case DW_TAG_volatile_type:
      case DW_TAG_restrict_type:
      case DW_TAG_atomic_type:
        t = type_of(t, mem);
        break;
      default:
        return t;
    }
  }
  return nullptr;
}

uint64_t size_of(Dwarf_Die* t) {
  Dwarf_Word n = 0;
  return t != nullptr && dwarf_aggregate_size(t, &n) == 0 ? n : 0;
}

bool member_offset(Dwarf_Die* m, uint64_t* off) {
  Dwarf_Attribute a;
  Dwarf_Word v = 0;
  if (dwarf_attr(m, DW_AT_data_member_location, &a) != nullptr) {
    if (dwarf_formudata(&a, &v) == 0) {
      *off = v;
      return true;
    }
    // A location expression (virtual bases): DW_OP_plus_uconst alone is a constant offset.
    Dwarf_Op* ops = nullptr;
    size_t n = 0;
    if (dwarf_getlocation(&a, &ops, &n) == 0 && n == 1 && ops[0].atom == DW_OP_plus_uconst) {
      *off = ops[0].number;
      return true;
    }
    return false;
  }
  if (dwarf_attr(m, DW_AT_data_bit_offset, &a) != nullptr && dwarf_formudata(&a, &v) == 0) {
    *off = v / 8;
    return true;
  }
  *off = 0;  // a union's members carry no location
  return true;
}

void flatten(Dwarf_Die* aggregate, const std::string& prefix, uint64_t base, int depth,
             std::vector<TypeMember>* out);

// One member of type `t` at `off` named `name`: nested structs are opened, unions become one
// member whose name joins theirs, arrays one member "name[]".
void add_member(Dwarf_Die* t_in, const std::string& name, uint64_t off, int depth,
                std::vector<TypeMember>* out) {
  Dwarf_Die mem;
  Dwarf_Die* t = strip(t_in, &mem);
  const uint64_t size = size_of(t);
  if (t == nullptr || size == 0) return;
  switch (dwarf_tag(t)) {
    case DW_TAG_structure_type:
    case DW_TAG_class_type:
      flatten(t, name.empty() ? "" : name + ".", off, depth + 1, out);
      return;
    case DW_TAG_union_type: {
      std::vector<TypeMember> alts;
      Dwarf_Die c;
      if (dwarf_child(t, &c) == 0) {
        do {
          if (dwarf_tag(&c) != DW_TAG_member) continue;
          const char* n = dwarf_diename(&c);
          alts.push_back({n != nullptr ? n : "", 0, 0});
        } while (dwarf_siblingof(&c, &c) == 0);
      }
      std::string joined;
      for (const auto& a : alts) {
        if (a.name.empty()) continue;
        joined += (joined.empty() ? "" : "|") + a.name;
      }
      if (joined.empty()) joined = "<union>";
      const std::string full = name.empty() ? joined : name + "." + joined;
      out->push_back({full, off, size});
      return;
    }
    case DW_TAG_array_type:
      out->push_back({name + "[]", off, size});
      return;
    default:
      out->push_back({name.empty() ? "<anonymous>" : name, off, size});
  }
}

void flatten(Dwarf_Die* aggregate, const std::string& prefix, uint64_t base, int depth,
             std::vector<TypeMember>* out) {
  if (depth > kMaxDepth) return;
  Dwarf_Die c;
  if (dwarf_child(aggregate, &c) != 0) return;
  do {
    const int tag = dwarf_tag(&c);
    if (tag != DW_TAG_member && tag != DW_TAG_inheritance) continue;
    // Static members are declarations without a place in the object.
    Dwarf_Attribute a;
    if (tag == DW_TAG_member && dwarf_attr(&c, DW_AT_external, &a) != nullptr) continue;
    uint64_t off = 0;
    if (!member_offset(&c, &off)) continue;
    const char* n = dwarf_diename(&c);
    // Base classes and anonymous structs lend their members without a prefix.
    std::string name = tag == DW_TAG_inheritance || n == nullptr ? prefix.empty() ? ""
                                                                   : prefix.substr(0, prefix.size() - 1)
                                                             : prefix + n;
    Dwarf_Die tm;
    Dwarf_Die* t = type_of(&c, &tm);
    if (t == nullptr) continue;
    if (tag == DW_TAG_inheritance || n == nullptr) {
      Dwarf_Die sm;
      Dwarf_Die* st = strip(t, &sm);
      if (st != nullptr && (dwarf_tag(st) == DW_TAG_structure_type || dwarf_tag(st) == DW_TAG_class_type)) {
        flatten(st, prefix, base + off, depth + 1, out);
        continue;
      }
    }
    add_member(t, name, base + off, depth, out);
  } while (dwarf_siblingof(&c, &c) == 0);
}

struct GlobalVarType {
  uint64_t start = 0, size = 0;
  Dwarf_Die type;  // the variable's type with arrays stripped
};

void scan_globals(Dwarf_Die* parent, Dwarf_Addr bias, int depth, std::vector<GlobalVarType>* out) {
  if (depth > 128) return;
  Dwarf_Die c;
  if (dwarf_child(parent, &c) != 0) return;
  do {
    switch (dwarf_tag(&c)) {
      case DW_TAG_variable: {
        Dwarf_Attribute loc;
        if (dwarf_attr(&c, DW_AT_location, &loc) == nullptr) break;
        Dwarf_Op* expr = nullptr;
        size_t len = 0;
        if (dwarf_getlocation(&loc, &expr, &len) != 0 || len != 1) break;
        Dwarf_Addr addr = 0;
        if (expr[0].atom == DW_OP_addr) {
          addr = expr[0].number;
        } else if (expr[0].atom == DW_OP_addrx || expr[0].atom == DW_OP_GNU_addr_index) {
          Dwarf_Attribute aa;
          if (dwarf_getlocation_attr(&loc, &expr[0], &aa) != 0 || dwarf_formaddr(&aa, &addr) != 0) break;
        } else {
          break;
        }
        Dwarf_Die tm;
        Dwarf_Die* t = type_of(&c, &tm);
        const uint64_t size = size_of(t);
        if (t == nullptr || size == 0) break;
        // An array global is an array of its element type.
        Dwarf_Die em;
        Dwarf_Die* e = t;
        for (int i = 0; i < kMaxDepth; ++i) {
          Dwarf_Die sm;
          Dwarf_Die* s = strip(e, &sm);
          if (s == nullptr || dwarf_tag(s) != DW_TAG_array_type) break;
          Dwarf_Die* inner = type_of(s, &em);
          if (inner == nullptr) break;
          tm = *inner;
          e = &tm;
        }
        out->push_back({addr + bias, size, *e});
        break;
      }
      case DW_TAG_namespace:
      case DW_TAG_module:
      case DW_TAG_subprogram:
      case DW_TAG_lexical_block:
        scan_globals(&c, bias, depth + 1, out);
        break;
      default:
        break;
    }
  } while (dwarf_siblingof(&c, &c) == 0);
}

std::string base_name(const char* path) {
  if (path == nullptr) return "";
  const char* s = std::strrchr(path, '/');
  return s != nullptr ? s + 1 : path;
}

}  // namespace

struct TypeReader::Impl {
  Dwfl* dwfl = nullptr;
  internal::CuFinder cus;
  std::unordered_map<const void*, const TypeLayout*> layouts;  // by type DIE
  std::deque<TypeLayout> storage;
  std::map<uint64_t, const TypeLayout*> by_call;  // allocated_type answers, by return address
  struct ModuleGlobals {
    bool done = false;
    std::vector<GlobalVarType> vars;  // sorted by start
  };
  std::unordered_map<const Dwfl_Module*, ModuleGlobals> globals;

  ~Impl() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }

  const TypeLayout* layout(Dwarf_Die* type) {
    Dwarf_Die um;
    Dwarf_Die* named = unqualified(type, &um);
    Dwarf_Die sm;
    Dwarf_Die* t = strip(type, &sm);
    if (named == nullptr || t == nullptr) return nullptr;
    auto [it, inserted] = layouts.try_emplace(named->addr, nullptr);
    if (!inserted) return it->second;
    TypeLayout l;
    l.name = internal::type_name(named);
    l.size = size_of(t);
    if (l.size == 0) return nullptr;
    const int tag = dwarf_tag(t);
    if (tag == DW_TAG_structure_type || tag == DW_TAG_class_type) {
      flatten(t, "", 0, 0, &l.members);
    } else if (tag == DW_TAG_union_type) {
      add_member(t, "", 0, 0, &l.members);
    }
    std::stable_sort(l.members.begin(), l.members.end(),
                     [](const TypeMember& a, const TypeMember& b) { return a.offset < b.offset; });
    // Bit-fields share bytes: members overlapping the one before join its name.
    std::vector<TypeMember> merged;
    for (auto& m : l.members) {
      if (m.offset + m.size > l.size) continue;
      if (!merged.empty() && m.offset < merged.back().offset + merged.back().size) {
        auto& b = merged.back();
        if (b.name != m.name) b.name += "|" + m.name;
        b.size = std::max(b.offset + b.size, m.offset + m.size) - b.offset;
        continue;
      }
      merged.push_back(std::move(m));
    }
    l.members = std::move(merged);
    storage.push_back(std::move(l));
    it->second = &storage.back();
    return it->second;
  }

  const TypeLayout* compute_allocated(uint64_t ret_addr, uint64_t object_size);
};

TypeReader::TypeReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TypeReader::~TypeReader() = default;

std::unique_ptr<TypeReader> TypeReader::create(const std::vector<ModuleSpec>& modules) {
  auto impl = std::make_unique<Impl>();
  impl->dwfl = dwfl_begin(&kCallbacks);
  if (impl->dwfl != nullptr) {
    dwfl_report_begin(impl->dwfl);
    for (const auto& m : modules)
      dwfl_report_elf(impl->dwfl, m.path.c_str(), m.path.c_str(), -1, m.load_bias, true);
    dwfl_report_end(impl->dwfl, nullptr, nullptr);
  }
  return std::unique_ptr<TypeReader>(new TypeReader(std::move(impl)));
}

const TypeLayout* TypeReader::allocated_type(uint64_t ret_addr, uint64_t object_size) {
  if (ret_addr == 0) return nullptr;
  const TypeLayout* t = nullptr;
  auto it = impl_->by_call.find(ret_addr);
  if (it != impl_->by_call.end()) {
    t = it->second;
  } else {
    t = impl_->compute_allocated(ret_addr, object_size);
    impl_->by_call.emplace(ret_addr, t);
  }
  // One call site may allocate objects of several sizes; the type must fit each.
  return t != nullptr && t->size <= object_size ? t : nullptr;
}

const TypeLayout* TypeReader::Impl::compute_allocated(uint64_t ret_addr, uint64_t) {
  if (dwfl == nullptr) return nullptr;
  Dwfl_Module* mod = dwfl_addrmodule(dwfl, ret_addr - 1);
  if (mod == nullptr) return nullptr;
  Dwarf_Addr bias = 0;
  Dwarf_Die* cu = cus.find(mod, ret_addr - 1, &bias);
  if (cu == nullptr) return nullptr;
  const Dwarf_Addr pc = ret_addr - 1 - bias;  // inside the call instruction
  const Dwarf_Addr after = ret_addr - bias;   // where the result is in rax
  int line = 0;
  std::string file;
  if (Dwarf_Line* l = dwarf_getsrc_die(cu, pc)) {
    dwarf_lineno(l, &line);
    file = base_name(dwarf_linesrc(l, nullptr, nullptr));
  }
  Dwarf_Die* scopes = nullptr;
  const int n = dwarf_getscopes(cu, pc, &scopes);
  const TypeLayout* found = nullptr;
  bool conflict = false;
  auto candidate = [&](Dwarf_Die* var) {
    Dwarf_Die tm;
    Dwarf_Die sm;
    Dwarf_Die* p = strip(type_of(var, &tm), &sm);
    if (p == nullptr || dwarf_tag(p) != DW_TAG_pointer_type) return;
    Dwarf_Die pm;
    Dwarf_Die* pointee = type_of(p, &pm);
    Dwarf_Die vm;
    if (pointee == nullptr || strip(pointee, &vm) == nullptr) return;  // void *
    const TypeLayout* t = layout(pointee);
    if (t == nullptr) return;
    if (found != nullptr && found != t && (found->name != t->name || found->size != t->size))
      conflict = true;
    found = t;
  };
  for (int i = 0; i < n; ++i) {
    Dwarf_Die* s = &scopes[i];
    Dwarf_Die c;
    if (dwarf_child(s, &c) == 0) {
      do {
        if (dwarf_tag(&c) != DW_TAG_variable) continue;
        int decl_line = 0;
        // Same line and file; when libdw cannot name the declaration's file (seen with Clang's
        // DWARF 5 file index 0) the line alone must match, within the calling function.
        const char* decl_file = dwarf_decl_file(&c);
        const bool same_line = line > 0 && dwarf_decl_line(&c, &decl_line) == 0 &&
                               decl_line == line &&
                               (decl_file == nullptr || base_name(decl_file) == file);
        bool in_rax = false;
        Dwarf_Attribute loc;
        if (dwarf_attr_integrate(&c, DW_AT_location, &loc) != nullptr) {
          Dwarf_Op* exprs[4];
          size_t lens[4];
          const int k = dwarf_getlocation_addr(&loc, after, exprs, lens, 4);
          for (int j = 0; j < k; ++j)
            if (lens[j] == 1 && exprs[j][0].atom == DW_OP_reg0) in_rax = true;
        }
        if (same_line || in_rax) candidate(&c);
      } while (dwarf_siblingof(&c, &c) == 0);
    }
    // Only the function making the call: its caller's variables are another line's.
    const int tag = dwarf_tag(s);
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) break;
  }
  std::free(scopes);
  return conflict ? nullptr : found;
}

const TypeLayout* TypeReader::global_type(uint64_t addr, uint64_t* start) {
  Impl& s = *impl_;
  if (s.dwfl == nullptr) return nullptr;
  Dwfl_Module* mod = dwfl_addrmodule(s.dwfl, addr);
  if (mod == nullptr) return nullptr;
  auto& g = s.globals[mod];
  if (!g.done) {
    g.done = true;
    Dwarf_Die* cu = nullptr;
    Dwarf_Addr bias = 0;
    while ((cu = dwfl_module_nextcu(mod, cu, &bias)) != nullptr) scan_globals(cu, bias, 0, &g.vars);
    std::sort(g.vars.begin(), g.vars.end(),
              [](const GlobalVarType& a, const GlobalVarType& b) { return a.start < b.start; });
  }
  auto it = std::upper_bound(g.vars.begin(), g.vars.end(), addr,
                             [](uint64_t a, const GlobalVarType& v) { return a < v.start; });
  // The nearest start at or before addr that covers it (globals do not overlap).
  for (int back = 0; it != g.vars.begin() && back < 4; ++back) {
    --it;
    if (addr < it->start + it->size) {
      const TypeLayout* t = s.layout(&it->type);
      if (t == nullptr) return nullptr;
      *start = it->start;
      return t;
    }
  }
  return nullptr;
}

}  // namespace whymiss::symbols
