// Internal to the geometry detectors (geometry.cpp, cpuid.cpp) and their tests.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/geometry.h"

namespace whymiss::detail {

// Turns (cache level, geometry) pairs found by a detector into a validated CacheGeometry named
// L1..Ln; `where` names the origin in error sentences ("cpuid leaf 4").
Result<CacheGeometry> geometry_from_detected(std::vector<std::pair<uint32_t, LevelGeometry>> caches,
                                             const std::string& source, const std::string& where);

// Decodes the subleaves {EAX, EBX, ECX, EDX} of a deterministic cache leaf (Intel leaf 4, AMD
// 0x8000001D), up to the first null descriptor. Apart from the cpuid instruction so tests can
// feed it register values.
Result<CacheGeometry> decode_cache_leaf(const std::vector<std::array<uint32_t, 4>>& subleaves,
                                        const std::string& leaf_name);

}  // namespace whymiss::detail
