// A set of line addresses: one bit per line in 2 KiB leaves (16384 lines each), found through a
// flat open-addressing table with a one-leaf memo. Compact for dense footprints; used for
// first-touch (compulsory) tracking. Not thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace whymiss::sim {

class LineSet {
 public:
  LineSet();
  ~LineSet();
  LineSet(const LineSet&) = delete;
  LineSet& operator=(const LineSet&) = delete;

  // Adds `line`; returns true when it was not yet present.
  bool insert(uint64_t line) {
    uint64_t* leaf = leaf_for(line >> kLeafBits, true);
    uint64_t bit = line & (kLeafLines - 1);
    uint64_t m = uint64_t(1) << (bit % 64);
    if (leaf[bit / 64] & m) return false;
    leaf[bit / 64] |= m;
    ++count_;
    return true;
  }
  bool contains(uint64_t line) const;
  // A hint that insert(line) comes soon: starts loading its word if its leaf is the memo leaf
  // (looking the leaf up would cost more than the hint saves when the line is never inserted).
  void prefetch(uint64_t line) const {
    if ((line >> kLeafBits) == memo_key_)
      __builtin_prefetch(&memo_leaf_[(line & (kLeafLines - 1)) / 64]);
  }
  // A stronger hint, for a caller that will insert(line) after other host cache misses: looks
  // the leaf up (the table is small and usually cached) and starts loading the line's word.
  // Nothing when the leaf does not exist yet.
  void prefetch_lookup(uint64_t line) const {
    const uint64_t key = line >> kLeafBits;
    const uint64_t* leaf = key == memo_key_ ? memo_leaf_ : find_leaf(key);
    if (leaf) __builtin_prefetch(&leaf[(line & (kLeafLines - 1)) / 64]);
  }
  uint64_t size() const { return count_; }
  // Empties the set, keeping its memory.
  void clear();

 private:
  static constexpr unsigned kLeafBits = 14;
  static constexpr uint64_t kLeafLines = uint64_t(1) << kLeafBits;
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key;
    uint64_t* leaf;
  };
  uint64_t* leaf_for(uint64_t key, bool create) {
    if (key == memo_key_) return memo_leaf_;
    return leaf_slow(key, create);
  }
  uint64_t* leaf_slow(uint64_t key, bool create);
  size_t slot_of(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  uint64_t* find_leaf(uint64_t key) const;
  void grow();

  std::vector<Slot> table_;
  unsigned shift_ = 0;
  size_t used_ = 0;
  uint64_t memo_key_ = kEmpty;
  uint64_t* memo_leaf_ = nullptr;
  uint64_t count_ = 0;
};

}  // namespace whymiss::sim
