#include "runtime/common/profile_strings.h"

#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace whymiss::rt {

uint32_t StringTable::add(const char* s) {
  const size_t n = std::strlen(s) + 1;
  if (!data || len + n > cap) return profile::kNoString;
  std::memcpy(data + len, s, n);
  const uint32_t off = uint32_t(len);
  len += n;
  return off;
}

namespace {

struct ModuleCtx {
  profile::ModuleRecord* out;
  size_t n, max;
  StringTable* strings;
};

int add_module(dl_phdr_info* info, size_t, void* arg) {
  auto& m = *static_cast<ModuleCtx*>(arg);
  if (m.n == m.max) return 0;
  char exe[4096];
  const char* path = info->dlpi_name;
  if (!path || !*path) {
    ssize_t k = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return 0;
    exe[k] = '\0';
    path = exe;
  }
  if (path[0] != '/') return 0;
  uint64_t lo = ~0ull, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    lo = std::min<uint64_t>(lo, info->dlpi_addr + ph.p_vaddr);
    hi = std::max<uint64_t>(hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  profile::ModuleRecord r{};
  r.load_bias = info->dlpi_addr;
  r.start = lo;
  r.end = hi;
  r.path_str = m.strings->add(path);
  if (r.path_str == profile::kNoString) return 0;
  m.out[m.n++] = r;
  return 0;
}

}  // namespace

size_t list_modules(profile::ModuleRecord* out, size_t max, StringTable& strings) {
  if (!out) return 0;
  ModuleCtx m{out, 0, max, &strings};
  dl_iterate_phdr(add_module, &m);
  return m.n;
}

}  // namespace whymiss::rt
