// Soft decoder measurements (printed, never asserted):
//  1. ns per decode_previous on real code (the functions of libc and of this program), with a
//     warm boundary cache and with a cold one (first lookup in each function decodes it).
//  2. For each ELF file given: how often the no-symbol heuristic finds the preceding instruction,
//     against the boundaries decoded from the file's own symbols. The heuristic reads only the
//     code bytes, so this is what it does on a stripped copy of the same file.
// Usage: soft_decode_bench [ELF...]
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/soft/boundary_cache.h"
#include "runtime/soft/decode.h"
#include "runtime/soft/modules.h"

using namespace whymiss::soft;
using namespace whymiss::soft::detail;

namespace {

double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Instruction starts of [start, end) plus the end reached.
std::vector<uint64_t> boundaries(uint64_t start, uint64_t end, const uint8_t* bytes) {
  std::vector<uint64_t> v;
  uint64_t p = start;
  while (p < end) {
    const uint8_t len = length_at(bytes + (p - start), end - p);
    if (!len) break;
    v.push_back(p);
    p += len;
  }
  v.push_back(p);
  return v;
}

void timing() {
  if (!init(64 << 20)) {
    std::printf("init failed\n");
    return;
  }
  const ModuleTable* t = current_modules();
  std::vector<uint64_t> ips, firsts;  // every boundary; one per function
  size_t functions = 0, instructions = 0;
  for (uint32_t i = 0; i < t->module_count; ++i) {
    const Module& m = t->modules[i];
    const bool want = std::strstr(m.path, "libc.so") || std::strcmp(m.path, "/proc/self/exe") == 0;
    if (!want) continue;
    for (uint32_t f = 0; f < m.function_count; ++f) {
      const FunctionRange& r = m.functions[f];
      const CodeSegment* seg = find_segment(*t, r.start);
      if (!seg || r.end > seg->hi) continue;
      const auto b = boundaries(r.start, r.end, reinterpret_cast<const uint8_t*>(r.start));
      if (b.size() < 2) continue;
      ++functions;
      instructions += b.size() - 1;
      firsts.push_back(b[b.size() / 2]);
      for (size_t k = 1; k < b.size(); ++k) ips.push_back(b[k]);
    }
  }
  ucontext_t uc{};
  RegisterView view{&uc, 0, 0};
  MemAccess m;
  size_t ok = 0;
  for (uint64_t ip : ips) ok += decode_previous(ip, view, &m) != DecodeStatus::NoBoundary;
  const int rounds = 5;
  double t0 = now_ns();
  for (int r = 0; r < rounds; ++r)
    for (uint64_t ip : ips) decode_previous(ip, view, &m);
  const double warm = (now_ns() - t0) / (rounds * static_cast<double>(ips.size()));
  double cold_total = 0;
  for (int r = 0; r < rounds; ++r) {
    init(64 << 20);
    t0 = now_ns();
    for (uint64_t ip : firsts) decode_previous(ip, view, &m);
    cold_total += now_ns() - t0;
  }
  const double cold = cold_total / (rounds * static_cast<double>(firsts.size()));
  t0 = now_ns();
  for (int r = 0; r < rounds; ++r)
    for (uint64_t ip : firsts) {
      MemAccess tmp;
      decode_at(ip, view, &tmp);
    }
  const double at = (now_ns() - t0) / (rounds * static_cast<double>(firsts.size()));
  std::printf("timing: %zu functions (libc + this program), %zu instructions, %.1f per function\n",
              functions, instructions, static_cast<double>(instructions) / functions);
  std::printf("  decode_previous found a predecessor for %zu of %zu boundaries\n", ok, ips.size());
  std::printf("  decode_previous, warm cache: %.0f ns/call\n", warm);
  std::printf("  decode_previous, cold cache (first lookup in a function): %.0f ns/call\n", cold);
  std::printf("  decode_at: %.0f ns/call\n", at);
}

// How many functions a 1 MiB arena holds: first lookups in every function of every module
// until one fails for lack of room.
void capacity() {
  init(1 << 20);
  const ModuleTable* t = current_modules();
  ucontext_t uc{};
  RegisterView view{&uc, 0, 0};
  MemAccess m;
  size_t tried = 0, instructions = 0;
  for (uint32_t i = 0; i < t->module_count && stats().cache_full == 0; ++i) {
    const Module& mod = t->modules[i];
    for (uint32_t f = 0; f < mod.function_count && stats().cache_full == 0; ++f) {
      const FunctionRange& r = mod.functions[f];
      const CodeSegment* seg = find_segment(*t, r.start);
      if (!seg || r.end > seg->hi) continue;
      const auto b = boundaries(r.start, r.end, reinterpret_cast<const uint8_t*>(r.start));
      if (b.size() < 2) continue;
      ++tried;
      instructions += b.size() - 1;
      decode_previous(b[1], view, &m);
    }
  }
  std::printf("capacity: 1 MiB arena: %llu functions cached (%.1f instructions each) when the "
              "first did not fit (%s)\n",
              static_cast<unsigned long long>(stats().functions_cached),
              static_cast<double>(instructions) / tried,
              stats().cache_full ? "full" : "never full: ran out of functions");
}

void heuristic(const char* path) {
  const int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    std::printf("%s: cannot open\n", path);
    return;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return;
  const auto* img = static_cast<const uint8_t*>(map);
  Elf64_Ehdr eh;
  std::memcpy(&eh, img, sizeof eh);
  const auto* ph = reinterpret_cast<const Elf64_Phdr*>(img + eh.e_phoff);
  std::vector<FunctionRange> f(parse_function_symbols(img, size, 0, 0, nullptr, 0));
  f.resize(parse_function_symbols(img, size, 0, 0, f.data(), f.size()));
  size_t total = 0, right = 0, wrong = 0;
  const double t0 = now_ns();
  for (const FunctionRange& r : f) {
    const Elf64_Phdr* seg = nullptr;
    for (int i = 0; i < eh.e_phnum; ++i)
      if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && r.start >= ph[i].p_vaddr &&
          r.end <= ph[i].p_vaddr + ph[i].p_filesz)
        seg = &ph[i];
    if (!seg) continue;
    const uint8_t* base = img + seg->p_offset - seg->p_vaddr;  // file bytes at a vaddr
    const auto b = boundaries(r.start, r.end, base + r.start);
    for (size_t k = 1; k < b.size(); ++k) {
      const uint64_t lo = b[k] - seg->p_vaddr > kHeuristicWindow ? b[k] - kHeuristicWindow : seg->p_vaddr;
      const unsigned back = heuristic_previous(base + lo, base + b[k]);
      ++total;
      if (back == 0) continue;
      (b[k] - back == b[k - 1] ? right : wrong) += 1;
    }
  }
  const double ns = (now_ns() - t0) / static_cast<double>(total);
  std::printf("heuristic on %s: %zu functions, %zu boundaries: right %zu (%.2f%%), wrong %zu "
              "(%.3f%%), no answer %zu (%.2f%%); %.0f ns per boundary incl. ground truth\n", path,
              f.size(), total, right, 100.0 * right / total, wrong, 100.0 * wrong / total,
              total - right - wrong, 100.0 * (total - right - wrong) / total, ns);
  munmap(map, size);
}

}  // namespace

int main(int argc, char** argv) {
  timing();
  capacity();
  for (int i = 1; i < argc; ++i) heuristic(argv[i]);
  return 0;
}
