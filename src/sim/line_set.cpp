#include "sim/line_set.h"

#include <cstring>

namespace whymiss::sim {

LineSet::LineSet() : table_(16, Slot{kEmpty, nullptr}), shift_(64 - 4) {}

LineSet::~LineSet() {
  for (const Slot& s : table_) delete[] s.leaf;
}

uint64_t* LineSet::find_leaf(uint64_t key) const {
  const size_t mask = table_.size() - 1;
  for (size_t i = slot_of(key);; i = (i + 1) & mask) {
    if (table_[i].key == key) return table_[i].leaf;
    if (table_[i].key == kEmpty) return nullptr;
  }
}

void LineSet::grow() {
  std::vector<Slot> old(table_.size() * 2, Slot{kEmpty, nullptr});
  old.swap(table_);
  --shift_;
  const size_t mask = table_.size() - 1;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    size_t i = slot_of(s.key);
    while (table_[i].key != kEmpty) i = (i + 1) & mask;
    table_[i] = s;
  }
}

uint64_t* LineSet::leaf_slow(uint64_t key, bool create) {
  uint64_t* leaf = find_leaf(key);
  if (!leaf) {
    if (!create) return nullptr;
    if ((used_ + 1) * 2 > table_.size()) grow();
    leaf = new uint64_t[kLeafLines / 64]();
    const size_t mask = table_.size() - 1;
    size_t i = slot_of(key);
    while (table_[i].key != kEmpty) i = (i + 1) & mask;
    table_[i] = Slot{key, leaf};
    ++used_;
  }
  memo_key_ = key;
  memo_leaf_ = leaf;
  return leaf;
}

void LineSet::clear() {
  for (const Slot& s : table_)
    if (s.leaf) std::memset(s.leaf, 0, kLeafLines / 8);
  count_ = 0;
}

bool LineSet::contains(uint64_t line) const {
  const uint64_t* leaf = find_leaf(line >> kLeafBits);
  if (!leaf) return false;
  uint64_t bit = line & (kLeafLines - 1);
  return (leaf[bit / 64] >> (bit % 64)) & 1;
}

}  // namespace whymiss::sim
