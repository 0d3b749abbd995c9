#include "sim/fa_lru.h"

namespace whymiss::sim {

FaLru::FaLru(uint64_t capacity_lines) : cap_(uint32_t(capacity_lines ? capacity_lines : 1)) {
  size_t tsize = 8;  // at least 8 slots: fp_of puts three line bits in the home
  uint32_t bits = 3;
  while (tsize < size_t(cap_) * 2) tsize <<= 1, ++bits;  // load factor <= 1/2
  table_.assign(tsize, Slot{0, kNil});
  mask_ = tsize - 1;
  shift_ = 32 - bits;  // a table has at most 2^31 slots (2^30 lines)
  nodes_.resize(cap_);
}

uint32_t FaLru::find(uint64_t line) const {
  const uint32_t fp = fp_of(line);
  for (size_t i = home(fp);; i = (i + 1) & mask_) {
    const Slot& s = table_[i];
    if (s.node == kNil) return kNil;
    if (s.fp == fp && nodes_[s.node].key == line) return s.node;
  }
}

void FaLru::unlink(uint32_t n) {
  const Node& x = nodes_[n];
  if (x.prev != kNil) nodes_[x.prev].next = x.next; else head_ = x.next;
  if (x.next != kNil) nodes_[x.next].prev = x.prev; else tail_ = x.prev;
}

void FaLru::push_front(uint32_t n) {
  nodes_[n].prev = kNil;
  nodes_[n].next = head_;
  if (head_ != kNil) nodes_[head_].prev = n; else tail_ = n;
  head_ = n;
}

void FaLru::table_erase(uint64_t line) {
  const uint32_t fp = fp_of(line);
  size_t i = home(fp);
  while (table_[i].node == kNil || table_[i].fp != fp || nodes_[table_[i].node].key != line)
    i = (i + 1) & mask_;
  // Backward-shift deletion keeps every probe chain unbroken without tombstones.
  for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    if (table_[j].node == kNil) break;
    size_t h = home(table_[j].fp);
    bool between = (i <= j) ? (i < h && h <= j) : (i < h || h <= j);
    if (!between) {
      table_[i] = table_[j];
      i = j;
    }
  }
  table_[i].node = kNil;
}

bool FaLru::access_slow(uint64_t line) {
  uint32_t n = find(line);
  if (n != kNil) {
    unlink(n);
    push_front(n);
    return true;
  }
  if (size_ < cap_) {
    n = size_++;
  } else {
    n = tail_;
    unlink(n);
    table_erase(nodes_[n].key);
  }
  nodes_[n].key = line;
  const uint32_t fp = fp_of(line);
  size_t i = home(fp);
  while (table_[i].node != kNil) i = (i + 1) & mask_;
  table_[i] = Slot{fp, n};
  push_front(n);
  return false;
}

}  // namespace whymiss::sim
