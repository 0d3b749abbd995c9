#include "sim/fa_lru.h"

namespace whymiss::sim {

FaLru::FaLru(uint64_t capacity_lines) : cap_(uint32_t(capacity_lines ? capacity_lines : 1)) {
  size_t tsize = 4;
  uint32_t bits = 2;
  while (tsize < size_t(cap_) * 2) tsize <<= 1, ++bits;  // load factor <= 1/2
  table_.assign(tsize, Slot{0, kNil});
  mask_ = tsize - 1;
  shift_ = 64 - bits;
  key_.resize(cap_);
  prev_.resize(cap_);
  next_.resize(cap_);
}

uint32_t FaLru::find(uint64_t line) const {
  for (size_t i = slot_of(line);; i = (i + 1) & mask_) {
    const Slot& s = table_[i];
    if (s.node == kNil) return kNil;
    if (s.key == line) return s.node;
  }
}

void FaLru::unlink(uint32_t n) {
  if (prev_[n] != kNil) next_[prev_[n]] = next_[n]; else head_ = next_[n];
  if (next_[n] != kNil) prev_[next_[n]] = prev_[n]; else tail_ = prev_[n];
}

void FaLru::push_front(uint32_t n) {
  prev_[n] = kNil;
  next_[n] = head_;
  if (head_ != kNil) prev_[head_] = n; else tail_ = n;
  head_ = n;
}

void FaLru::table_erase(uint64_t line) {
  size_t i = slot_of(line);
  while (table_[i].key != line || table_[i].node == kNil) i = (i + 1) & mask_;
  // Backward-shift deletion keeps every probe chain unbroken without tombstones.
  for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    if (table_[j].node == kNil) break;
    size_t home = slot_of(table_[j].key);
    bool between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
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
    table_erase(key_[n]);
  }
  key_[n] = line;
  size_t i = slot_of(line);
  while (table_[i].node != kNil) i = (i + 1) & mask_;
  table_[i] = Slot{line, n};
  push_front(n);
  return false;
}

}  // namespace whymiss::sim
