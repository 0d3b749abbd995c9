#include "cli/elf_info.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace whymiss::cli {

bool ElfInfo::exact_runtime() const {
  for (const auto& n : needed)
    if (n.find("libwhymiss-rt") != std::string::npos) return true;
  return false;
}

Result<ElfInfo> inspect_elf(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("cannot read '" + path + "': " + std::strerror(errno));
  elf_version(EV_CURRENT);
  Elf* e = elf_begin(fd, ELF_C_READ, nullptr);
  auto done = [&](Result<ElfInfo> r) {
    if (e) elf_end(e);
    ::close(fd);
    return r;
  };
  GElf_Ehdr eh;
  if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh))
    return done(make_error("'" + path + "' is not an ELF executable"));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64)
    return done(make_error("'" + path + "' is not an x86-64 program; whymiss profiles x86-64 only"));
  ElfInfo info;
  size_t nph = 0;
  elf_getphdrnum(e, &nph);
  for (size_t i = 0; i < nph; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(e, int(i), &ph) && ph.p_type == PT_INTERP) info.dynamic = true;
  }
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(e, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC) continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (!d || sh.sh_entsize == 0) continue;
    for (size_t j = 0; j < sh.sh_size / sh.sh_entsize; ++j) {
      GElf_Dyn dyn;
      if (!gelf_getdyn(d, int(j), &dyn) || dyn.d_tag == DT_NULL) break;
      if (dyn.d_tag != DT_NEEDED) continue;
      if (const char* s = elf_strptr(e, sh.sh_link, dyn.d_un.d_val)) info.needed.emplace_back(s);
    }
  }
  return done(info);
}

Result<std::string> find_program(const std::string& name) {
  if (name.empty()) return make_error("the program name is empty");
  auto runnable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    struct stat st;
    if (::stat(name.c_str(), &st) != 0) return make_error("cannot find program '" + name + "'");
    if (!runnable(name)) return make_error("'" + name + "' is not an executable file");
    return name;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t pos = 0; pos <= dirs.size();) {
    size_t end = dirs.find(':', pos);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(pos, end - pos);
    std::string cand = (dir.empty() ? "." : dir) + "/" + name;
    if (runnable(cand)) return cand;
    pos = end + 1;
  }
  return make_error("cannot find program '" + name + "' on PATH");
}

}  // namespace whymiss::cli
