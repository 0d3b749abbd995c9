// Function-start tables from ELF symbol tables (see modules.h). Memory comes from mmap, not
// malloc, so building the tables does not perturb the heap layout the profiler measures.
#include "runtime/soft/modules.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cstring>

namespace whymiss::soft::detail {
namespace {

std::atomic<const ModuleTable*> g_table{nullptr};
uint32_t g_next_id = 1;

void* map_anon(size_t bytes) {
  void* p = mmap(nullptr, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

bool is_function(const Elf64_Sym& s) {
  const unsigned type = ELF64_ST_TYPE(s.st_info);
  return (type == STT_FUNC || type == STT_GNU_IFUNC) && s.st_shndx != SHN_UNDEF && s.st_value != 0;
}

// The function symbols of one module, mmap'ed; nullptr/0 when the file has none or is unreadable.
struct Functions {
  FunctionRange* ranges = nullptr;
  size_t count = 0;
};

Functions read_functions(const char* path, uint64_t bias, uint64_t limit) {
  Functions f;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return f;
  struct stat st;
  void* image = MAP_FAILED;
  if (fstat(fd, &st) == 0 && st.st_size > 0)
    image = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (image == MAP_FAILED) return f;
  const auto* bytes = static_cast<const uint8_t*>(image);
  const size_t size = static_cast<size_t>(st.st_size);
  const size_t n = parse_function_symbols(bytes, size, bias, limit, nullptr, 0);
  if (n > 0) {
    auto* out = static_cast<FunctionRange*>(map_anon(n * sizeof(FunctionRange)));
    if (out) {
      f.count = parse_function_symbols(bytes, size, bias, limit, out, n);
      f.ranges = out;
    }
  }
  munmap(image, size);
  return f;
}

struct Builder {
  const ModuleTable* old = nullptr;
  Module* modules = nullptr;
  CodeSegment* segments = nullptr;
  uint32_t module_cap = 0, segment_cap = 0;
  uint32_t module_count = 0, segment_count = 0;
  bool counting = true;  // first pass only counts
};

const Module* find_old(const ModuleTable* old, uint64_t base, const char* path) {
  if (!old) return nullptr;
  for (uint32_t i = 0; i < old->module_count; ++i)
    if (old->modules[i].base == base && std::strcmp(old->modules[i].path, path) == 0)
      return &old->modules[i];
  return nullptr;
}

int visit(struct dl_phdr_info* info, size_t, void* data) {
  auto* b = static_cast<Builder*>(data);
  uint32_t exec = 0;
  uint64_t hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    ++exec;
    hi = std::max<uint64_t>(hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  if (exec == 0) return 0;
  if (b->counting) {
    ++b->module_count;
    b->segment_count += exec;
    return 0;
  }
  if (b->module_count >= b->module_cap || b->segment_count + exec > b->segment_cap) return 0;
  const uint32_t index = b->module_count++;
  Module& m = b->modules[index];
  m.base = info->dlpi_addr;
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  // The main program has an empty name; the vDSO a bare one that is no file (it gets the heuristic).
  const bool vdso = info->dlpi_addr == getauxval(AT_SYSINFO_EHDR);
  const char* path = name[0] == '/' ? name : (name[0] == '\0' && !vdso ? "/proc/self/exe" : "");
  std::strncpy(m.path, path, sizeof m.path - 1);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    CodeSegment& s = b->segments[b->segment_count++];
    s.lo = info->dlpi_addr + ph.p_vaddr;
    s.hi = s.lo + ph.p_memsz;
    s.module = index;
  }
  if (const Module* o = find_old(b->old, m.base, m.path)) {
    m.id = o->id;
    m.functions = o->functions;
    m.function_count = o->function_count;
  } else {
    m.id = g_next_id++;
    if (m.path[0]) {
      const Functions f = read_functions(m.path, m.base, hi);
      m.functions = f.ranges;
      m.function_count = static_cast<uint32_t>(f.count);
    }
  }
  return 0;
}

}  // namespace

size_t parse_function_symbols(const uint8_t* image, size_t size, uint64_t bias, uint64_t limit,
                              FunctionRange* out, size_t cap) {
  if (size < sizeof(Elf64_Ehdr)) return 0;
  Elf64_Ehdr eh;
  std::memcpy(&eh, image, sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return 0;
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff == 0 || eh.e_shoff > size ||
      eh.e_shnum > (size - eh.e_shoff) / sizeof(Elf64_Shdr))
    return 0;
  // Headers and symbols are copied out: a malformed file may place them misaligned.
  Elf64_Shdr table{};
  bool found = false;
  for (int pass = 0; pass < 2 && !found; ++pass) {  // .symtab first, .dynsym if stripped
    const uint32_t want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
    for (unsigned i = 0; i < eh.e_shnum && !found; ++i) {
      Elf64_Shdr sh;
      std::memcpy(&sh, image + eh.e_shoff + i * sizeof sh, sizeof sh);
      found = sh.sh_type == want && sh.sh_offset <= size && sh.sh_size <= size - sh.sh_offset &&
              sh.sh_entsize == sizeof(Elf64_Sym);
      if (found) table = sh;
    }
  }
  if (!found) return 0;
  const uint8_t* syms = image + table.sh_offset;
  const size_t nsyms = table.sh_size / sizeof(Elf64_Sym);
  auto sym = [&](size_t i) {
    Elf64_Sym s;
    std::memcpy(&s, syms + i * sizeof s, sizeof s);
    return s;
  };
  size_t n = 0;
  for (size_t i = 0; i < nsyms; ++i) n += is_function(sym(i));
  if (n > cap || !out) return n;
  n = 0;
  for (size_t i = 0; i < nsyms; ++i) {
    const Elf64_Sym s = sym(i);
    if (!is_function(s)) continue;
    const uint64_t start = bias + s.st_value;
    if (start < bias || start > UINT64_MAX - 16) continue;  // corrupt: wraps around
    const uint64_t end = start + s.st_size;
    out[n++] = {start, end > start ? end : 0};
  }
  // Aliases share a start: keep the largest extent. Zero-sized symbols end where the next begins.
  std::sort(out, out + n, [](const FunctionRange& a, const FunctionRange& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  size_t k = 0;
  for (size_t i = 0; i < n; ++i)
    if (k == 0 || out[k - 1].start != out[i].start) out[k++] = out[i];
  for (size_t i = 0; i < k; ++i) {
    if (out[i].end > out[i].start) continue;
    const uint64_t next = i + 1 < k ? out[i + 1].start : limit;
    out[i].end = next > out[i].start ? next : out[i].start + 1;
  }
  return k;
}

bool load_modules() {
  Builder b;
  b.old = g_table.load(std::memory_order_acquire);
  dl_iterate_phdr(visit, &b);
  // A few spare slots in case a module is loaded by another thread between the two passes.
  b.module_cap = b.module_count + 8;
  b.segment_cap = b.segment_count + 16;
  b.module_count = b.segment_count = 0;
  b.counting = false;
  const size_t bytes = sizeof(ModuleTable) + b.module_cap * sizeof(Module) +
                       b.segment_cap * sizeof(CodeSegment);
  auto* mem = static_cast<uint8_t*>(map_anon(bytes));
  if (!mem) return false;
  auto* table = reinterpret_cast<ModuleTable*>(mem);
  b.modules = reinterpret_cast<Module*>(mem + sizeof(ModuleTable));
  b.segments = reinterpret_cast<CodeSegment*>(mem + sizeof(ModuleTable) +
                                              b.module_cap * sizeof(Module));
  dl_iterate_phdr(visit, &b);
  std::sort(b.segments, b.segments + b.segment_count,
            [](const CodeSegment& x, const CodeSegment& y) { return x.lo < y.lo; });
  table->modules = b.modules;
  table->module_count = b.module_count;
  table->segments = b.segments;
  table->segment_count = b.segment_count;
  g_table.store(table, std::memory_order_release);
  return true;
}

void reset_modules() { g_table.store(nullptr, std::memory_order_release); }

const ModuleTable* current_modules() { return g_table.load(std::memory_order_acquire); }

const CodeSegment* find_segment(const ModuleTable& t, uint64_t ip) {
  const CodeSegment* s = t.segments;
  uint32_t lo = 0, hi = t.segment_count;  // first segment with lo > ip
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (s[mid].lo <= ip) lo = mid + 1; else hi = mid;
  }
  if (lo == 0 || ip >= s[lo - 1].hi) return nullptr;
  return &s[lo - 1];
}

bool find_function(const Module& m, const CodeSegment& seg, uint64_t ip, FunctionRange* out) {
  const FunctionRange* f = m.functions;
  uint32_t lo = 0, hi = m.function_count;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (f[mid].start <= ip) lo = mid + 1; else hi = mid;
  }
  if (lo == 0 || ip >= f[lo - 1].end || f[lo - 1].start < seg.lo) return false;
  out->start = f[lo - 1].start;
  out->end = std::min(f[lo - 1].end, seg.hi);
  return true;
}

bool breakpoint_forbidden(uint64_t ip, uint64_t own_ip) {
  const ModuleTable* t = current_modules();
  if (!t) return true;
  const CodeSegment* seg = find_segment(*t, ip);
  if (!seg || seg->module >= t->module_count) return true;
  const CodeSegment* own = find_segment(*t, own_ip);
  if (own && own->module == seg->module && strcmp(t->modules[seg->module].path, "/proc/self/exe") != 0)
    return true;
  const char* path = t->modules[seg->module].path;
  const char* base = path;
  for (const char* c = path; *c; ++c)
    if (*c == '/') base = c + 1;
  const char* deny[] = {"libc.so", "libc-", "ld-linux", "ld64.so", "libpthread", "libwhymiss",
                        "libZydis", "linux-vdso", "linux-gate", "libstdc++", "libgcc_s"};
  for (const char* d : deny)
    if (strncmp(base, d, strlen(d)) == 0) return true;
  return false;
}


}  // namespace whymiss::soft::detail
