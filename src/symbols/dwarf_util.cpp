#include "symbols/dwarf_util.h"

#include <dwarf.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "symbols/symbolizer.h"

namespace whymiss::symbols::internal {
namespace {

// Guards recursion on malformed or absurdly deep DWARF.
constexpr int kMaxDepth = 128;

const char* attr_string(Dwarf_Die* die, unsigned int name) {
  Dwarf_Attribute mem;
  return dwarf_formstring(dwarf_attr_integrate(die, name, &mem));
}

bool attr_udata(Dwarf_Die* die, unsigned int name, Dwarf_Word* out) {
  Dwarf_Attribute mem;
  Dwarf_Attribute* a = dwarf_attr_integrate(die, name, &mem);
  return a != nullptr && dwarf_formudata(a, out) == 0;
}

// Appends (outermost first) the function scopes below `parent` that contain `pc`.
void descend(Dwarf_Die* parent, Dwarf_Addr pc, int depth, std::vector<Dwarf_Die>* chain) {
  if (depth > kMaxDepth) return;
  Dwarf_Die child;
  if (dwarf_child(parent, &child) != 0) return;
  do {
    switch (dwarf_tag(&child)) {
      case DW_TAG_subprogram:
      case DW_TAG_inlined_subroutine:
        if (dwarf_haspc(&child, pc) == 1) {
          chain->push_back(child);
          descend(&child, pc, depth + 1, chain);
          return;
        }
        break;
      case DW_TAG_lexical_block:
      case DW_TAG_try_block:
      case DW_TAG_catch_block:
        if (dwarf_haspc(&child, pc) == 1) return descend(&child, pc, depth + 1, chain);
        break;
      default:
        break;
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

// Address ranges of the out-of-line functions under `parent` (CU or namespace).
template <typename Range>
void collect_functions(Dwarf_Die* parent, int depth, std::vector<Range>* out) {
  if (depth > kMaxDepth) return;
  Dwarf_Die child;
  if (dwarf_child(parent, &child) != 0) return;
  do {
    switch (dwarf_tag(&child)) {
      case DW_TAG_subprogram: {
        Dwarf_Addr base = 0, lo = 0, hi = 0;
        for (ptrdiff_t off = 0; (off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0;) {
          if (hi > lo) out->push_back(Range{lo, hi, child});
        }
        break;
      }
      case DW_TAG_namespace:
      case DW_TAG_module:
        collect_functions(&child, depth + 1, out);  // no range of their own: look inside
        break;
      default:
        break;
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

Dwarf_Die* referenced_type(Dwarf_Die* die, Dwarf_Die* mem) {
  Dwarf_Attribute a;
  return dwarf_formref_die(dwarf_attr_integrate(die, DW_AT_type, &a), mem);
}

std::string type_name_at(Dwarf_Die* t, int depth);

std::string array_dims(Dwarf_Die* array) {
  std::string dims;
  Dwarf_Die sub;
  if (dwarf_child(array, &sub) != 0) return "[]";
  do {
    if (dwarf_tag(&sub) != DW_TAG_subrange_type) continue;
    Dwarf_Word n = 0;
    if (attr_udata(&sub, DW_AT_count, &n)) {
      dims += "[" + std::to_string(n) + "]";
    } else if (attr_udata(&sub, DW_AT_upper_bound, &n)) {
      // Upper bound -1 (as unsigned) is the zero-length array.
      dims += "[" + std::to_string(n + 1) + "]";
    } else {
      dims += "[]";
    }
  } while (dwarf_siblingof(&sub, &sub) == 0);
  return dims.empty() ? "[]" : dims;
}

std::string tagged(const char* keyword, Dwarf_Die* t) {
  const char* name = dwarf_diename(t);
  return std::string(keyword) + " " + (name != nullptr ? name : "<anonymous>");
}

std::string type_name_at(Dwarf_Die* t, int depth) {
  if (t == nullptr) return "void";
  if (depth > 32) return "?";
  Dwarf_Die inner_mem;
  Dwarf_Die* inner = referenced_type(t, &inner_mem);
  const char* name = dwarf_diename(t);
  switch (dwarf_tag(t)) {
    case DW_TAG_structure_type:
      return tagged("struct", t);
    case DW_TAG_class_type:
      return tagged("class", t);
    case DW_TAG_union_type:
      return tagged("union", t);
    case DW_TAG_enumeration_type:
      return tagged("enum", t);
    case DW_TAG_pointer_type:
      return type_name_at(inner, depth + 1) + " *";
    case DW_TAG_reference_type:
      return type_name_at(inner, depth + 1) + " &";
    case DW_TAG_rvalue_reference_type:
      return type_name_at(inner, depth + 1) + " &&";
    case DW_TAG_const_type:
    case DW_TAG_volatile_type: {
      const char* q = dwarf_tag(t) == DW_TAG_const_type ? "const" : "volatile";
      // "T * const" binds to the pointer; otherwise the west-side "const T" reads naturally.
      if (inner != nullptr && dwarf_tag(inner) == DW_TAG_pointer_type) {
        return type_name_at(inner, depth + 1) + " " + q;
      }
      // A qualified array is an array of qualified elements; GCC often marks both.
      std::string rest = type_name_at(inner, depth + 1);
      std::string prefix = std::string(q) + " ";
      return rest.compare(0, prefix.size(), prefix) == 0 ? rest : prefix + rest;
    }
    case DW_TAG_array_type:
      return type_name_at(inner, depth + 1) + array_dims(t);
    case DW_TAG_subroutine_type:
      return "<function>";
    case DW_TAG_ptr_to_member_type:
      return "<member pointer>";
    default:
      // Base types, typedefs, unspecified types; qualifiers we do not spell (atomic, restrict).
      if (name != nullptr) return name;
      return inner != nullptr ? type_name_at(inner, depth + 1) : "?";
  }
}

// The static address of variable `var` (DW_OP_addr / DW_OP_addrx as the whole location).
bool static_address(Dwarf_Die* var, Dwarf_Addr* out) {
  Dwarf_Attribute loc;
  if (dwarf_attr(var, DW_AT_location, &loc) == nullptr) return false;
  Dwarf_Op* expr = nullptr;
  size_t len = 0;
  if (dwarf_getlocation(&loc, &expr, &len) != 0 || len != 1) return false;
  if (expr[0].atom == DW_OP_addr) {
    *out = expr[0].number;
    return true;
  }
  if (expr[0].atom == DW_OP_addrx || expr[0].atom == DW_OP_GNU_addr_index) {
    Dwarf_Attribute addr_attr;
    return dwarf_getlocation_attr(&loc, &expr[0], &addr_attr) == 0 &&
           dwarf_formaddr(&addr_attr, out) == 0;
  }
  return false;
}

void scan_variables(Dwarf_Die* parent, Dwarf_Addr bias, int depth,
                    std::unordered_map<uint64_t, std::string>* out) {
  if (depth > kMaxDepth) return;
  Dwarf_Die child;
  if (dwarf_child(parent, &child) != 0) return;
  do {
    switch (dwarf_tag(&child)) {
      case DW_TAG_variable: {
        Dwarf_Addr addr = 0;
        if (static_address(&child, &addr)) {
          Dwarf_Die type_mem;
          Dwarf_Die* type = referenced_type(&child, &type_mem);
          if (type != nullptr) out->try_emplace(addr + bias, type_name_at(type, 0));
        }
        break;
      }
      case DW_TAG_namespace:
      case DW_TAG_module:
      case DW_TAG_subprogram:
      case DW_TAG_lexical_block:
        scan_variables(&child, bias, depth + 1, out);
        break;
      default:
        break;  // types' members are declarations; their definitions sit at namespace scope
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

bool is_cxx(Dwarf_Die* cu) {
  switch (dwarf_srclang(cu)) {
    case DW_LANG_C_plus_plus:
    case DW_LANG_C_plus_plus_03:
    case DW_LANG_C_plus_plus_11:
    case DW_LANG_C_plus_plus_14:
      return true;
    default:
      return false;
  }
}

// `name` prefixed with the namespaces and classes enclosing the declaration of `die`.
std::string qualified(Dwarf_Die* die, const char* name) {
  Dwarf_Die decl = *die;
  for (int i = 0; i < 8; ++i) {  // concrete → abstract origin → in-class declaration
    Dwarf_Attribute a;
    Dwarf_Die next;
    if (dwarf_attr(&decl, DW_AT_abstract_origin, &a) == nullptr &&
        dwarf_attr(&decl, DW_AT_specification, &a) == nullptr) {
      break;
    }
    if (dwarf_formref_die(&a, &next) == nullptr) break;
    decl = next;
  }
  Dwarf_Die* scopes = nullptr;
  int n = dwarf_getscopes_die(&decl, &scopes);  // [0] is decl itself, then its parents
  std::string prefix;
  for (int i = n - 1; i >= 1; --i) {
    const char* scope_name = dwarf_diename(&scopes[i]);
    switch (dwarf_tag(&scopes[i])) {
      case DW_TAG_namespace:
        prefix += scope_name != nullptr ? scope_name : "(anonymous namespace)";
        prefix += "::";
        break;
      case DW_TAG_structure_type:
      case DW_TAG_class_type:
      case DW_TAG_union_type:
        prefix += scope_name != nullptr ? scope_name : "<anonymous>";
        prefix += "::";
        break;
      default:
        break;
    }
  }
  std::free(scopes);
  return prefix + name;
}

}  // namespace

const std::vector<FunctionFinder::Range>& FunctionFinder::index(Dwarf_Die* cu) {
  auto [it, inserted] = cu_index_.try_emplace(cu->addr);
  if (inserted) {
    collect_functions(cu, 0, &it->second);
    std::sort(it->second.begin(), it->second.end(),
              [](const Range& a, const Range& b) { return a.lo < b.lo; });
  }
  return it->second;
}

std::vector<Dwarf_Die> FunctionFinder::scopes(Dwarf_Die* cu, Dwarf_Addr pc) {
  const std::vector<Range>& idx = index(cu);
  auto it = std::upper_bound(idx.begin(), idx.end(), pc,
                             [](Dwarf_Addr a, const Range& r) { return a < r.lo; });
  if (it == idx.begin() || pc >= std::prev(it)->hi) return {};
  Dwarf_Die function = std::prev(it)->die;
  std::vector<Dwarf_Die> chain{function};
  descend(&function, pc, 1, &chain);
  return {chain.rbegin(), chain.rend()};
}

std::string_view FunctionFinder::name(Dwarf_Die* die, Dwarf_Die* cu) {
  auto [it, inserted] = names_.try_emplace(die->addr);
  if (!inserted) return it->second;
  const char* linkage = attr_string(die, DW_AT_linkage_name);
  if (linkage == nullptr) linkage = attr_string(die, DW_AT_MIPS_linkage_name);
  if (linkage != nullptr) {
    it->second = pool_->intern(demangle(linkage));
  } else if (const char* plain = attr_string(die, DW_AT_name)) {
    // GCC emits no linkage name for members of types in anonymous namespaces; spell the
    // scopes out so "TestBody" reads "(anonymous namespace)::Foo_Test::TestBody".
    it->second = pool_->intern(is_cxx(cu) ? qualified(die, plain) : plain);
  }
  return it->second;
}

Dwarf_Die* CuFinder::find(Dwfl_Module* mod, Dwarf_Addr ip, Dwarf_Addr* bias) {
  // .debug_aranges, when present, answers without touching every CU.
  if (Dwarf_Die* cu = dwfl_module_addrdie(mod, ip, bias)) return cu;
  const ModuleIndex& m = index(mod);
  *bias = m.bias;
  if (ip < m.bias) return nullptr;
  Dwarf_Addr pc = ip - m.bias;
  auto it = std::upper_bound(m.ranges.begin(), m.ranges.end(), pc,
                             [](Dwarf_Addr a, const Range& r) { return a < r.lo; });
  // Ranges of different CUs may overlap (code the linker discarded keeps a tombstone address
  // such as 0): scan back to the nearest start whose range covers pc.
  for (size_t j = static_cast<size_t>(it - m.ranges.begin()); j-- > 0;) {
    if (m.reach[j] <= pc) break;  // nothing at or before j reaches pc
    if (pc < m.ranges[j].hi) return m.ranges[j].cu;
  }
  return nullptr;
}

const CuFinder::ModuleIndex& CuFinder::index(Dwfl_Module* mod) {
  auto [it, inserted] = modules_.try_emplace(mod);
  ModuleIndex& m = it->second;
  if (!inserted) return m;
  Dwarf_Die* cu = nullptr;
  Dwarf_Addr bias = 0;
  while ((cu = dwfl_module_nextcu(mod, cu, &bias)) != nullptr) {
    m.bias = bias;
    // dwarf_ranges on a CU DIE reads DW_AT_low_pc/high_pc or DW_AT_ranges (DWARF 4
    // .debug_ranges, DWARF 5 .debug_rnglists with DW_FORM_rnglistx, DW_FORM_addrx bounds).
    Dwarf_Addr base = 0, lo = 0, hi = 0;
    for (ptrdiff_t off = 0; (off = dwarf_ranges(cu, off, &base, &lo, &hi)) > 0;) {
      if (hi > lo) m.ranges.push_back(Range{lo, hi, cu});
    }
  }
  std::sort(m.ranges.begin(), m.ranges.end(),
            [](const Range& a, const Range& b) { return a.lo < b.lo; });
  m.reach.resize(m.ranges.size());
  Dwarf_Addr running = 0;
  for (size_t i = 0; i < m.ranges.size(); ++i) {
    running = std::max(running, m.ranges[i].hi);
    m.reach[i] = running;
  }
  return m;
}

bool is_artificial(Dwarf_Die* die) {
  Dwarf_Attribute mem;
  Dwarf_Attribute* a = dwarf_attr_integrate(die, DW_AT_artificial, &mem);
  bool flag = false;
  return a != nullptr && dwarf_formflag(a, &flag) == 0 && flag;
}

void call_site(Dwarf_Die* inl, Dwarf_Files* files, size_t nfiles, const char** file,
               uint32_t* line) {
  *file = nullptr;
  *line = 0;
  Dwarf_Word v = 0;
  if (attr_udata(inl, DW_AT_call_line, &v)) *line = static_cast<uint32_t>(v);
  if (files != nullptr && attr_udata(inl, DW_AT_call_file, &v) && v < nfiles) {
    *file = dwarf_filesrc(files, v, nullptr, nullptr);
  }
}

std::string type_name(Dwarf_Die* type) {
  return type_name_at(type, 0);
}

void collect_variable_types(Dwfl_Module* mod, std::unordered_map<uint64_t, std::string>* out) {
  Dwarf_Die* cu = nullptr;
  Dwarf_Addr bias = 0;
  while ((cu = dwfl_module_nextcu(mod, cu, &bias)) != nullptr) scan_variables(cu, bias, 0, out);
}

}  // namespace whymiss::symbols::internal
