#include "sim/replacement.h"

#include <string>

namespace whymiss::sim {
namespace {

// True LRU with a per-set use counter; victim = smallest stamp.
class Lru final : public Replacement {
 public:
  Lru(uint64_t sets, uint32_t ways) : ways_(ways), clock_(sets, 0), stamp_(sets * ways, 0) {}
  void touch(uint32_t set, uint32_t way) override { stamp_[size_t(set) * ways_ + way] = ++clock_[set]; }
  uint32_t victim(uint32_t set) override {
    const uint64_t* s = &stamp_[size_t(set) * ways_];
    uint32_t best = 0;
    for (uint32_t w = 1; w < ways_; ++w)
      if (s[w] < s[best]) best = w;
    return best;
  }

 private:
  uint32_t ways_;
  std::vector<uint64_t> clock_;
  std::vector<uint64_t> stamp_;
};

// Binary-tree pseudo-LRU: ways-1 node bits per set in heap order (node 1 is the root); a bit
// says which half to evict from next (0 = left, 1 = right).
class TreePlru final : public Replacement {
 public:
  TreePlru(uint64_t sets, uint32_t ways) : ways_(ways), bits_(sets, 0) {
    while ((1u << depth_) < ways) ++depth_;
  }
  void touch(uint32_t set, uint32_t way) override {
    uint64_t& b = bits_[set];
    uint32_t node = 1;
    for (uint32_t d = depth_; d-- > 0;) {
      uint32_t dir = (way >> d) & 1;
      if (dir) b &= ~(uint64_t(1) << node); else b |= uint64_t(1) << node;  // point away
      node = 2 * node + dir;
    }
  }
  uint32_t victim(uint32_t set) override {
    uint64_t b = bits_[set];
    uint32_t node = 1;
    for (uint32_t d = 0; d < depth_; ++d) node = 2 * node + ((b >> node) & 1);
    return node - ways_;
  }

 private:
  uint32_t ways_;
  uint32_t depth_ = 0;
  std::vector<uint64_t> bits_;
};

// Uniform random victim from a per-set xorshift stream: deterministic for a given seed and
// independent of how sets interleave across threads.
class RandomPolicy final : public Replacement {
 public:
  RandomPolicy(uint64_t sets, uint32_t ways, uint64_t seed) : ways_(ways), state_(sets) {
    for (uint64_t s = 0; s < sets; ++s) state_[s] = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (s + 1) * 0xBF58476D1CE4E5B9ull;
  }
  void touch(uint32_t, uint32_t) override {}
  uint32_t victim(uint32_t set) override {
    uint64_t x = state_[set];
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    state_[set] = x;
    return uint32_t(x % ways_);
  }

 private:
  uint32_t ways_;
  std::vector<uint64_t> state_;
};

}  // namespace

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
