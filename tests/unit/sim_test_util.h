// Helpers shared by the simulator tests.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "sim/sim.h"

namespace whymiss::sim::testing {

inline CacheGeometry geo(std::vector<LevelGeometry> levels) {
  CacheGeometry g;
  g.levels = std::move(levels);
  g.source = "test";
  return g;
}

inline std::unique_ptr<Hierarchy> make(const CacheGeometry& g, Knobs k = {}) {
  auto h = Hierarchy::create(g, k);
  EXPECT_TRUE(h.ok()) << (h.ok() ? "" : h.error());
  return h.ok() ? std::move(h.value()) : nullptr;
}

inline uint64_t misses(const Counters& c, size_t level, Outcome o) {
  return c.level[level].misses_of(o);
}

}  // namespace whymiss::sim::testing
