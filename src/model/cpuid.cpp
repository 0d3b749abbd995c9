// Cache detection from cpuid: Intel's deterministic cache parameters (leaf 4) and AMD's cache
// topology leaf (0x8000001D), which share one register layout.
#include <array>
#include <cctype>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "model/geometry.h"
#include "model/geometry_detect.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define WHYMISS_HAVE_CPUID 1
#endif

namespace whymiss {
namespace detail {

Result<CacheGeometry> decode_cache_leaf(const std::vector<std::array<uint32_t, 4>>& subleaves,
                                        const std::string& leaf_name) {
  std::vector<std::pair<uint32_t, LevelGeometry>> caches;
  for (const auto& r : subleaves) {
    const uint32_t eax = r[0], ebx = r[1], ecx = r[2];
    const uint32_t type = eax & 0x1f;  // 0 none (end), 1 data, 2 instruction, 3 unified
    if (type == 0) break;
    if (type != 1 && type != 3) continue;
    const uint32_t level = (eax >> 5) & 0x7;
    const bool fully_associative = (eax >> 9) & 1;
    const uint64_t ways = (ebx >> 22) + 1;
    const uint64_t partitions = ((ebx >> 12) & 0x3ff) + 1;
    const uint64_t line = (ebx & 0xfff) + 1;
    const uint64_t sets = uint64_t{ecx} + 1;
    LevelGeometry lv;
    // At most 2^10 * 2^10 * 2^12 * 2^32 = 2^62: no overflow. Like Linux, partitions count
    // toward the size, so the simulator sees them as extra sets.
    lv.size = ways * partitions * line * sets;
    lv.ways = static_cast<uint32_t>(ways);
    lv.line = static_cast<uint32_t>(line);
    // Fully associative: one set holding every line, whatever the sets field says.
    if (fully_associative && lv.size / line <= UINT32_MAX) {
      lv.ways = static_cast<uint32_t>(lv.size / line);
    }
    caches.emplace_back(level, std::move(lv));
  }
  return geometry_from_detected(std::move(caches), "cpuid", "cpuid " + leaf_name);
}

}  // namespace detail

Result<CacheGeometry> detect_from_cpuid() {
#ifdef WHYMISS_HAVE_CPUID
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return make_error("the cpuid instruction is not available");
  const unsigned max_basic = a;
  char raw_vendor[12];
  std::memcpy(raw_vendor, &b, 4);
  std::memcpy(raw_vendor + 4, &d, 4);
  std::memcpy(raw_vendor + 8, &c, 4);
  std::string vendor;
  for (char ch : raw_vendor) {
    vendor += std::isprint(static_cast<unsigned char>(ch)) ? ch : '?';
  }

  unsigned leaf = 4;
  std::string leaf_name = "leaf 4";
  if (vendor == "AuthenticAMD" || vendor == "HygonGenuine") {
    // AMD leaf 4 is reserved; 0x8000001D is valid only when TOPOEXT (0x80000001 ECX[22]) is set.
    const unsigned max_ext = __get_cpuid_max(0x80000000, nullptr);
    bool topoext = false;
    if (max_ext >= 0x80000001 && __get_cpuid(0x80000001, &a, &b, &c, &d)) topoext = (c >> 22) & 1;
    if (max_ext < 0x8000001D || !topoext) {
      return make_error("cpuid on this " + vendor +
                        " CPU does not describe its caches (leaf 0x8000001D needs the TOPOEXT "
                        "feature, which it does not report)");
    }
    leaf = 0x8000001D;
    leaf_name = "leaf 0x8000001D";
  } else if (max_basic < 4) {
    return make_error("cpuid on this " + vendor +
                      " CPU does not describe its caches (leaf 4 is "
                      "beyond its highest leaf, " +
                      std::to_string(max_basic) + ")");
  }

  std::vector<std::array<uint32_t, 4>> subleaves;
  for (unsigned sub = 0; sub < 64; ++sub) {  // real CPUs list under ten caches
    if (!__get_cpuid_count(leaf, sub, &a, &b, &c, &d)) break;
    subleaves.push_back({a, b, c, d});
    if ((a & 0x1f) == 0) break;
  }
  return detail::decode_cache_leaf(subleaves, leaf_name);
#else
  return make_error("cpuid cache detection needs an x86 CPU");
#endif
}

}  // namespace whymiss
