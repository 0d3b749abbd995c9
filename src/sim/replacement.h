// Replacement policies for one set-associative array. Single-threaded per set: callers hold the
// lock of the shard that owns the set.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "sim/sim.h"

namespace whymiss::sim {

class Replacement {
 public:
  virtual ~Replacement() = default;
  // The way was hit or filled: it becomes the most recently used.
  virtual void touch(uint32_t set, uint32_t way) = 0;
  // The way to evict when every way of the set is valid.
  virtual uint32_t victim(uint32_t set) = 0;

  // Tree-PLRU needs a power-of-two way count; the error says so.
  static Result<std::unique_ptr<Replacement>> make(Policy p, uint64_t sets, uint32_t ways,
                                                   uint64_t seed);
};

}  // namespace whymiss::sim
