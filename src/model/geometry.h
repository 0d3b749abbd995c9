// Cache geometry: what the simulator models, detected from the machine or given by the user.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"

namespace whymiss {

struct LevelGeometry {
  std::string name;       // "L1", "L2", "L3"
  uint64_t size = 0;      // bytes
  uint32_t ways = 0;      // associativity; ways * line * sets == size
  uint32_t line = 0;      // bytes
  uint64_t sets() const { return (ways && line) ? size / (uint64_t(ways) * line) : 0; }
};

// Levels ordered from closest to the core outwards. With two or more levels, every level but the
// last is private to a simulated core and the last is shared by all cores; a single level is
// private. All levels use one line size.
struct CacheGeometry {
  std::vector<LevelGeometry> levels;
  std::string source;  // where it came from: "sysfs", "cpuid", "--cache", "default"
  uint32_t line() const { return levels.empty() ? 0 : levels.front().line; }
  std::string to_spec() const;  // "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64"
};

inline constexpr size_t kMaxLevels = 4;
inline constexpr uint64_t kMaxLevelBytes = uint64_t(1) << 40;  // 1024G per level

// Checks that the simulator can model it: 1..kMaxLevels levels, sizes > 0, ways > 0,
// line a power of two >= 8 and equal across levels, size divisible into ways x line (any set
// count: see indexing_note).
Status validate(const CacheGeometry& g);

// Parses "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64" (size suffix K/M/G, binary; ways; line bytes).
// Levels may be named L1..L4 and must be given in order. Validates the result.
Result<CacheGeometry> parse_cache_spec(std::string_view spec);

// Reads data/unified caches from a sysfs cache directory such as
// /sys/devices/system/cpu/cpu0/cache (index*/level,type,size,ways_of_associativity,
// coherency_line_size). Instruction caches are skipped.
Result<CacheGeometry> detect_from_sysfs(const std::string& cache_dir);

// Reads the cache descriptors from cpuid (leaf 4 on Intel, 0x8000001D on AMD).
Result<CacheGeometry> detect_from_cpuid();

// AMD Zen 5 as documented: L1D 48K 12-way, L2 1M 16-way, L3 32M 16-way, 64-byte lines.
CacheGeometry default_geometry();

// sysfs of cpu0, else cpuid, else default_geometry() with a source that says why both failed;
// never fails.
CacheGeometry detect_geometry();

// "" when every level has a power-of-two set count; else one sentence naming the levels that do
// not and how they are modelled, for reports.
std::string indexing_note(const CacheGeometry& g);

// "48K", "1M", "32M", "1536" : bytes as a short human string.
std::string format_size(uint64_t bytes);

}  // namespace whymiss
