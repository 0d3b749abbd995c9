#include "sim/replacement.h"

#include <string>

namespace whymiss::sim {

Result<std::unique_ptr<Replacement>> Replacement::make(Policy p, uint64_t sets, uint32_t ways,
                                                       uint64_t seed) {
  switch (p) {
    case Policy::LRU:
      return std::unique_ptr<Replacement>(new Lru(sets, ways));
    case Policy::TreePLRU:
      if (ways == 0 || (ways & (ways - 1)) != 0 || ways > 64)
        return make_error("tree-PLRU needs a power-of-two associativity of at most 64, but a level has " +
                          std::to_string(ways) + " ways; use --policy lru or random");
      if (ways == 1) return std::unique_ptr<Replacement>(new Lru(sets, ways));
      return std::unique_ptr<Replacement>(new TreePlru(sets, ways));
    case Policy::Random:
      return std::unique_ptr<Replacement>(new RandomPolicy(sets, ways, seed));
  }
  return make_error("unknown replacement policy");
}

}  // namespace whymiss::sim
