// A fully-associative LRU cache of line addresses: the shadow that separates capacity from
// conflict misses. O(1) per access: open-addressing hash (linear probing, backward-shift
// deletion) over an intrusive doubly-linked recency list. Not thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace whymiss::sim {

class FaLru {
 public:
  explicit FaLru(uint64_t capacity_lines);
  // Returns whether `line` was present; afterwards it is the most recently used, and the least
  // recently used line was dropped if the cache was full.
  bool access(uint64_t line) {
    if (head_ != kNil && key_[head_] == line) return true;  // already MRU: nothing moves
    return access_slow(line);
  }
  bool contains(uint64_t line) const { return find(line) != kNil; }
  uint64_t size() const { return size_; }
  uint64_t capacity() const { return cap_; }

 private:
  static constexpr uint32_t kNil = 0xFFFFFFFFu;
  bool access_slow(uint64_t line);
  uint32_t find(uint64_t line) const;
  size_t slot_of(uint64_t line) const { return size_t((line * 0x9E3779B97F4A7C15ull) >> shift_); }
  void unlink(uint32_t n);
  void push_front(uint32_t n);
  void table_erase(uint64_t line);
  struct Slot {
    uint64_t key;   // the line, valid when node != kNil
    uint32_t node;  // index into the recency list
  };

  uint32_t cap_;
  uint32_t size_ = 0;
  uint32_t head_ = kNil, tail_ = kNil;
  std::vector<uint64_t> key_;
  std::vector<uint32_t> prev_, next_;
  std::vector<Slot> table_;  // the key sits in the slot so probes touch one array
  uint32_t shift_;
  size_t mask_;
};

}  // namespace whymiss::sim
