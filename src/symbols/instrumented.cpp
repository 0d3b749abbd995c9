#include "symbols/instrumented.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cstring>

namespace whymiss::symbols {
namespace {

// Entry points every instrumented object calls: a function's entry, or a plain access. (Atomics
// alone, `__tsan_atomic*`, do not count: a library may be built to call only those.)
bool is_access_entry(const char* name) {
  return std::strncmp(name, "__tsan_func_entry", 17) == 0 || std::strncmp(name, "__tsan_read", 11) == 0 ||
         std::strncmp(name, "__tsan_write", 12) == 0 || std::strncmp(name, "__tsan_unaligned_", 17) == 0;
}

}  // namespace

Instrumentation module_instrumentation(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Instrumentation::Unreadable;
  elf_version(EV_CURRENT);
  Elf* e = elf_begin(fd, ELF_C_READ, nullptr);
  bool imports = false, defines = false, elf_ok = e && elf_kind(e) == ELF_K_ELF;
  for (Elf_Scn* scn = nullptr; elf_ok && (scn = elf_nextscn(e, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) || sh.sh_entsize == 0)
      continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (!d) continue;
    for (size_t j = 0; j < sh.sh_size / sh.sh_entsize; ++j) {
      GElf_Sym sym;
      if (!gelf_getsym(d, int(j), &sym)) break;
      const char* name = elf_strptr(e, sh.sh_link, sym.st_name);
      if (!name || !is_access_entry(name)) continue;
      (sym.st_shndx == SHN_UNDEF ? imports : defines) = true;
    }
  }
  if (e) elf_end(e);
  ::close(fd);
  if (!elf_ok) return Instrumentation::Unreadable;
  // The runtime defines the entries (a whymiss-cc program linked statically with the ABI layer
  // would define them too, but whymiss-cc refuses static links).
  if (defines) return Instrumentation::WhymissRuntime;
  return imports ? Instrumentation::Instrumented : Instrumentation::NotInstrumented;
}

}  // namespace whymiss::symbols
