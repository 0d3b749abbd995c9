// Fuzzes parse_cache_spec. Beyond not crashing, checks its contract: an accepted spec validates
// and round-trips through to_spec(); a rejected one yields a non-empty one-line sentence.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/geometry.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view spec(reinterpret_cast<const char*>(data), size);
  whymiss::Result<whymiss::CacheGeometry> r = whymiss::parse_cache_spec(spec);
  if (!r.ok()) {
    check(!r.error().empty() && r.error().find('\n') == std::string::npos);
    return 0;
  }
  const whymiss::CacheGeometry& g = *r;
  check(validate(g).ok() && g.source == "--cache");
  whymiss::Result<whymiss::CacheGeometry> again = whymiss::parse_cache_spec(g.to_spec());
  check(again.ok() && again->levels.size() == g.levels.size());
  for (size_t i = 0; i < g.levels.size(); ++i) {
    const whymiss::LevelGeometry& a = g.levels[i];
    const whymiss::LevelGeometry& b = again->levels[i];
    check(a.name == b.name && a.size == b.size && a.ways == b.ways && a.line == b.line);
    check(a.sets() * a.ways * a.line == a.size);
  }
  return 0;
}
