// Replacement policies for one set-associative array. Single-threaded per set: callers hold the
// lock of the shard that owns the set.
//
// The concrete policies are `final` and defined here so that Cache, which knows its policy, can
// call them without a virtual call (the simulator's miss path calls touch/victim on every fill).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "sim/sim.h"
#include "sim/zeroed.h"

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

// True LRU with a per-set use counter; victim = smallest stamp (the lowest way on a tie, which
// only happens among never-touched ways). Each set's counter sits in front of its stamps, so a
// touch reads and writes one small contiguous block.
class Lru final : public Replacement {
 public:
  Lru(uint64_t sets, uint32_t ways)
      : stride_(ways + 1), ways_(ways), stamp_(make_zeroed<uint64_t>(sets * stride_)) {}
  void touch(uint32_t set, uint32_t way) override {
    uint64_t* s = &stamp_[size_t(set) * stride_];
    s[1 + way] = ++s[0];
  }
  uint32_t victim(uint32_t set) override {
    const uint64_t* s = &stamp_[size_t(set) * stride_ + 1];
    // The running minimum stays in a register (comparing against s[best] would make every
    // step wait for a load that depends on the previous step).
    uint64_t m = s[0];
    uint32_t best = 0;
    for (uint32_t w = 1; w < ways_; ++w) {
      const bool lt = s[w] < m;
      m = lt ? s[w] : m;
      best = lt ? w : best;
    }
    return best;
  }

 private:
  uint32_t stride_, ways_;
  ZeroedArray<uint64_t> stamp_;  // per set: [clock, stamp of way 0, ..., stamp of way ways-1]
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
      if (dir)
        b &= ~(uint64_t(1) << node);
      else
        b |= uint64_t(1) << node;  // point away
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
    for (uint64_t s = 0; s < sets; ++s)
      state_[s] = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (s + 1) * 0xBF58476D1CE4E5B9ull;
  }
  void touch(uint32_t, uint32_t) override {}
  uint32_t victim(uint32_t set) override {
    uint64_t x = state_[set];
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    state_[set] = x;
    return uint32_t(x % ways_);
  }

 private:
  uint32_t ways_;
  std::vector<uint64_t> state_;
};

}  // namespace whymiss::sim
