// A fully-associative LRU cache of line addresses: the shadow that separates capacity from
// conflict misses. O(1) per access: open-addressing hash (linear probing, Robin Hood order,
// backward-shift deletion) over an intrusive doubly-linked recency list. Not thread-safe.
//
// Layout, for the big shadows (a 32 MiB level has 512 Ki lines) where every update is a host
// cache miss: a table slot is 8 bytes (32-bit node index + the top 32 bits of the line's hash,
// which include the slot number, so neither a probe past another line nor a backward shift needs
// to read a node), and a node keeps its line and both links together (16 bytes), so reaching and
// unlinking it costs one host line, not three arrays. Eight consecutive lines share a hash and
// sit in consecutive slots (one host line of the table), so a streaming access pattern costs a
// table miss per eight lines instead of one per line. Such runs of homes make long clusters;
// Robin Hood order (each chain sorted by home) lets a lookup of an absent line stop after the
// slots homed at or before its own, instead of walking to the end of the cluster: the absent
// case is what the shadows of small levels see on almost every access. The grouping pays only
// where the table is not in the host's L1: a shadow whose full table fits in kGroupSlots slots
// (32 KiB, an L1's shadow) hashes every line on its own. (Grouped, a 768-line L1 shadow walked
// ~5 slots per lookup on a column walk, whose lines fill whole groups. An L2's 256 KiB table
// stays grouped: ungrouped, a sequential stream cost it a host L1 miss per line, 0.76x.)
//
// Memory follows the footprint until the cache is full: the table starts at kFirstSlots slots and
// doubles (every line re-homed) whenever it would pass load factor 1/2, the nodes double when all
// are used; a 300 MiB level's shadow (~210 MiB when full) costs a program that touches 10 MiB of
// lines a few MiB. Full, it is as before: 2^k >= 2 x capacity slots, one node per line.
//
// Recency order is only needed once the cache is full (it decides what to evict). Until then a
// node keeps the time of its last access instead of list links, so a hit is a lookup and a store,
// not an unlink and a push; the list is built by sorting on those times when the cache fills.
// Most programs never fill the shadows of their bigger levels, and a small one not even L1's.
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
    if (line == mru_) return true;  // already most recent: nothing moves
    return access_slow(line);
  }
  bool contains(uint64_t line) const;
  // A hint that access(line) or contains(line) comes soon: starts loading its table slot.
  void prefetch(uint64_t line) const { __builtin_prefetch(&table_[home(fp_of(line))]); }
  uint64_t size() const { return size_; }
  uint64_t capacity() const { return cap_; }
  // Empties the cache, keeping its memory (no allocation).
  void clear();

 private:
  static constexpr uint32_t kNil = 0xFFFFFFFFu;
  struct Slot {
    uint32_t fp;    // fp_of(line), valid when node != kNil
    uint32_t node;  // index into nodes_, kNil = empty
  };
  struct Node {
    uint64_t key;  // the line
    union {
      struct {
        uint32_t prev, next;  // once full
      };
      uint64_t stamp;  // until then: when it was last accessed (clock_)
    };
  };
  // 32 bits whose top log2(table size) bits are the line's home slot (the table has at most
  // 2^31 slots): a multiplicative hash of line / 8, with the home's three low bits replaced by
  // line % 8, so lines 8k..8k+7 have consecutive homes. The bits below the home still come from
  // the hash and tell most other lines apart without reading their node.
  // Ungrouped (group_bits_ 0): the hash of the line itself, no bits replaced. (A branch that
  // never changes for a shadow, cheaper than the two variable shifts it skips.)
  uint32_t fp_of(uint64_t line) const {
    if (group_bits_ == 0) return uint32_t((line * 0x9E3779B97F4A7C15ull) >> 32);
    const uint32_t g = uint32_t(((line >> 3) * 0x9E3779B97F4A7C15ull) >> 32);
    return (g & ~(7u << shift_)) | (uint32_t(line & 7) << shift_);
  }
  size_t home(uint32_t fp) const { return size_t(fp >> shift_); }
  // How far slot i is from the home of the line it holds (fingerprint fp).
  size_t dist(size_t i, uint32_t fp) const { return (i - home(fp)) & mask_; }
  bool access_slow(uint64_t line);
  void insert(uint64_t line);  // access_slow's miss path: line is absent
  void build_order();  // the cache just filled: link the nodes by stamp, most recent first
  bool full() const { return size_ == cap_; }  // recency is a list from then on
  uint32_t find(uint64_t line) const;
  void unlink(uint32_t n);
  void push_front(uint32_t n);
  void table_insert(Slot s);
  void table_erase(uint64_t line, uint32_t n);  // n: line's node
  void resize_table(size_t slots);  // a power of two; re-homes every line
  static constexpr size_t kFirstSlots = 256;
  static constexpr size_t kGroupSlots = size_t(1) << 12;  // bigger full tables group lines by 8
  static constexpr uint32_t kPrefetchVictimLines = 1u << 14;  // 256 KiB of nodes and up

  uint32_t cap_;
  uint32_t size_ = 0;
  uint32_t head_ = kNil, tail_ = kNil;  // once full
  uint64_t clock_ = 0;              // until full
  uint64_t mru_ = ~uint64_t(0);     // the most recently accessed line (never a line address)
  std::vector<Node> nodes_;
  std::vector<Slot> table_;  // power of two, load factor <= 1/2
  size_t max_slots_;         // its size once the cache is full
  uint32_t shift_;           // 32 - log2(table size)
  unsigned group_bits_ = 3;  // lines 8k..8k+7 share a hash (3), or each has its own (0)
  size_t mask_;
};

}  // namespace whymiss::sim
