// One set-associative array (one level of one core, or the shared level). Entries keep the
// line address as tag, the MESI state, a dirty bit and the byte-granule mask this holder touched
// during its tenure. Callers hold the lock of the shard that owns the set.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "sim/replacement.h"

namespace whymiss::sim {

enum class Mesi : uint8_t { I = 0, S, E, M };

struct Entry {
  uint64_t mask = 0;  // granules accessed by this holder since the line was filled here
  Mesi state = Mesi::I;
  bool dirty = false;
};

class Cache {
 public:
  static constexpr uint64_t kInvalid = ~0ull;
  static Result<std::unique_ptr<Cache>> make(uint64_t sets, uint32_t ways, Policy p, uint64_t seed);

  uint32_t set_of(uint64_t line) const { return uint32_t(line & set_mask_); }
  // Index of `line` in the flat arrays, or -1.
  int64_t find(uint64_t line) const {
    size_t base = size_t(set_of(line)) * ways_;
    const uint64_t* t = &tag_[base];
    if (ways_ <= 16) {
      // No early exit: the way a line sits in is random, so a loop that stops at it mispredicts
      // its exit on most lookups; compare-and-select over the whole set does not branch.
      int64_t found = -1;
      for (uint32_t w = 0; w < ways_; ++w) found = t[w] == line ? int64_t(w) : found;
      return found < 0 ? -1 : int64_t(base) + found;
    }
    for (uint32_t w = 0; w < ways_; ++w)
      if (t[w] == line) return int64_t(base + w);
    return -1;
  }
  // A hint that find(line) comes soon: starts loading the set's tags.
  void prefetch(uint64_t line) const { __builtin_prefetch(&tag_[size_t(set_of(line)) * ways_]); }
  // Where to put a new line of `set`: an invalid way if any, else the policy's victim.
  size_t fill_slot(uint32_t set) {
    size_t base = size_t(set) * ways_;
    for (uint32_t w = 0; w < ways_; ++w)
      if (tag_[base + w] == kInvalid) return base + w;
    return base + victim(set);
  }
  // `idx` holds a valid line (just hit or filled): its set comes from the tag, not a division.
  void touch(size_t idx) {
    const uint32_t set = set_of(tag_[idx]), way = uint32_t(idx - size_t(set) * ways_);
    switch (kind_) {  // devirtualised: the concrete policies are final
      case Kind::Lru: static_cast<Lru*>(repl_.get())->touch(set, way); break;
      case Kind::Plru: static_cast<TreePlru*>(repl_.get())->touch(set, way); break;
      case Kind::Random: break;  // random replacement keeps no recency
    }
  }
  void invalidate(size_t idx) {
    tag_[idx] = kInvalid;
    entry_[idx] = Entry{};
  }

  uint64_t& tag(size_t idx) { return tag_[idx]; }
  Entry& entry(size_t idx) { return entry_[idx]; }
  uint64_t sets() const { return set_mask_ + 1; }
  uint32_t ways() const { return ways_; }

 private:
  Cache() = default;
  uint64_t set_mask_ = 0;
  uint32_t ways_ = 0;
  std::vector<uint64_t> tag_;
  std::vector<Entry> entry_;
  enum class Kind : uint8_t { Lru, Plru, Random };
  uint32_t victim(uint32_t set) {
    switch (kind_) {
      case Kind::Lru: return static_cast<Lru*>(repl_.get())->victim(set);
      case Kind::Plru: return static_cast<TreePlru*>(repl_.get())->victim(set);
      case Kind::Random: return static_cast<RandomPolicy*>(repl_.get())->victim(set);
    }
    return 0;
  }
  Kind kind_ = Kind::Lru;
  std::unique_ptr<Replacement> repl_;
};

}  // namespace whymiss::sim
