#include "sim/fa_lru.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "sim/zeroed.h"

namespace whymiss::sim {

FaLru::FaLru(uint64_t capacity_lines) : cap_(uint32_t(capacity_lines ? capacity_lines : 1)) {
  max_slots_ = 8;  // at least 8 slots: fp_of puts three line bits in the home
  while (max_slots_ < size_t(cap_) * 2) max_slots_ <<= 1;  // load factor <= 1/2 when full
  if (max_slots_ <= kGroupSlots) group_bits_ = 0;  // (before any fp_of)
  resize_table(std::min<size_t>(max_slots_, kFirstSlots));
  nodes_.resize(std::min<size_t>(cap_, kFirstSlots / 2));
}

void FaLru::resize_table(size_t slots) {
  table_.clear();  // (its contents are not needed: every line is re-homed below)
  reserve_huge(table_, slots);
  table_.assign(slots, Slot{0, kNil});
  mask_ = slots - 1;
  shift_ = 32 - uint32_t(__builtin_ctzll(slots));  // a table has at most 2^31 slots (2^30 lines)
  // Homes depend on the table's size: every line goes in again (in node order, which Robin Hood
  // insertion does not mind).
  for (uint32_t n = 0; n < size_; ++n) table_insert(Slot{fp_of(nodes_[n].key), n});
}

__attribute__((always_inline)) inline uint32_t FaLru::find(uint64_t line) const {
  const uint32_t fp = fp_of(line);
  size_t i = home(fp);
  for (size_t d = 0;; i = (i + 1) & mask_, ++d) {
    const Slot& s = table_[i];
    if (s.node == kNil) return kNil;
    if (s.fp == fp && nodes_[s.node].key == line) return s.node;
    // Robin Hood order: past the slots of homes up to ours, the line cannot be further on.
    if (dist(i, s.fp) < d) return kNil;
  }
}

__attribute__((always_inline)) inline void FaLru::unlink(uint32_t n) {
  const Node& x = nodes_[n];
  if (x.prev != kNil) nodes_[x.prev].next = x.next; else head_ = x.next;
  if (x.next != kNil) nodes_[x.next].prev = x.prev; else tail_ = x.prev;
}

__attribute__((always_inline)) inline void FaLru::push_front(uint32_t n) {
  nodes_[n].prev = kNil;
  nodes_[n].next = head_;
  if (head_ != kNil) nodes_[head_].prev = n; else tail_ = n;
  head_ = n;
}

void FaLru::table_erase(uint64_t line, uint32_t n) {
  const uint32_t fp = fp_of(line);
  size_t i = home(fp);
  while (table_[i].fp != fp || table_[i].node != n) i = (i + 1) & mask_;
  // Backward shift: the displaced slots after the hole move back one, which keeps both the
  // chains unbroken (no tombstones) and the Robin Hood order.
  for (;;) {
    const size_t j = (i + 1) & mask_;
    const Slot& s = table_[j];
    if (s.node == kNil || home(s.fp) == j) break;
    table_[i] = s;
    i = j;
  }
  table_[i].node = kNil;
}

void FaLru::table_insert(Slot cur) {
  // Robin Hood: a slot goes to a line whose home is no later than its resident's, so every
  // chain is sorted by home and a lookup stops at the first slot homed after its own.
  size_t i = home(cur.fp);
  for (size_t d = 0;; i = (i + 1) & mask_, ++d) {
    Slot& s = table_[i];
    if (s.node == kNil) {
      s = cur;
      return;
    }
    const size_t sd = dist(i, s.fp);
    if (sd < d) {
      std::swap(cur, s);
      d = sd;
    }
  }
}

bool FaLru::contains(uint64_t line) const { return find(line) != kNil; }

void FaLru::clear() {
  std::fill(table_.begin(), table_.end(), Slot{0, kNil});
  size_ = 0;
  head_ = tail_ = kNil;
  clock_ = 0;
  mru_ = ~uint64_t(0);
}

void FaLru::build_order() {
  std::vector<uint32_t> byage(size_);
  for (uint32_t i = 0; i < size_; ++i) byage[i] = i;
  std::sort(byage.begin(), byage.end(),
            [&](uint32_t a, uint32_t b) { return nodes_[a].stamp > nodes_[b].stamp; });
  for (uint32_t i = 0; i < size_; ++i) {
    Node& x = nodes_[byage[i]];
    x.prev = i == 0 ? kNil : byage[i - 1];
    x.next = i + 1 == size_ ? kNil : byage[i + 1];
  }
  head_ = byage.front();
  tail_ = byage.back();
}

// Inlined into access_slow: out of line (so that hits save no registers for it), bench_sim's
// sequential miss trace, where every shadow access lands here, ran ~5% slower.
inline __attribute__((always_inline)) void FaLru::insert(uint64_t line) {
  uint32_t n;
  if (!full()) {
    // Memory follows the footprint: twice the table and the nodes when they are full enough.
    if (size_t(size_ + 1) * 2 > table_.size() && table_.size() < max_slots_)
      resize_table(table_.size() * 2);
    if (size_ == nodes_.size()) {
      const size_t grown = std::min<size_t>(cap_, nodes_.size() * 2);
      reserve_huge(nodes_, grown);
      nodes_.resize(grown);
    }
    n = size_++;
    nodes_[n].key = line;
    nodes_[n].stamp = ++clock_;
    table_insert(Slot{fp_of(line), n});
    if (full()) build_order();
    return;
  }
  n = tail_;
  unlink(n);
  table_erase(nodes_[n].key, n);
  nodes_[n].key = line;
  table_insert(Slot{fp_of(line), n});
  push_front(n);
  // The next miss evicts the new tail (its node is cached: unlink just wrote it): start loading
  // what that eviction will wait for, its predecessor's node and its own table slot. In a big
  // shadow fed lines at random both are host cache misses, and the next miss is far enough away
  // for them to arrive. (Small shadows are cached whole.)
  if (cap_ >= kPrefetchVictimLines && tail_ != kNil) {
    const Node& t = nodes_[tail_];
    if (t.prev != kNil) __builtin_prefetch(&nodes_[t.prev]);
    __builtin_prefetch(&table_[home(fp_of(t.key))]);
  }
}

bool FaLru::access_slow(uint64_t line) {
  mru_ = line;
  const uint32_t n = find(line);
  if (n != kNil) {
    if (!full()) {
      nodes_[n].stamp = ++clock_;
    } else if (n != head_) {
      unlink(n);
      push_front(n);
    }
    return true;
  }
  insert(line);
  return false;
}

}  // namespace whymiss::sim
