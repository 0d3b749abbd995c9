// The directory (docs/parallel-sim.md, section 2, rule 2): which cores' last private level holds
// a line, so that a write or read miss, an upgrade and a shared-level eviction find the other
// copies without looking the line up in every core.
//
// A sharers word has bit (core % 64) set for every core whose last private level holds the line;
// with more than 64 cores a bit stands for every core of its residue, and users check the cores
// it names. With an inclusive shared level the word lives in the shared level's own entry of the
// line (Entry::mask, which the shared level does not otherwise use): every privately held line is
// there. Otherwise (a non-inclusive shared level, or none) a SharerTable per shard holds the lines
// some core holds: a flat open-addressing map (linear probing, backward-shift deletion, no
// tombstones) from line to sharers, without the lines no core holds. Not thread-safe: the shard
// lock of its lines covers it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/sim.h"

namespace whymiss::sim {

inline uint64_t sharer_bit(uint32_t core) { return uint64_t(1) << (core & 63); }

class SharerTable {
 public:
  SharerTable() = default;  // allocates on the first put
  uint64_t get(uint64_t line) const {
    if (used_ == 0) return 0;
    for (size_t i = home(line);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.line == line) return s.sharers;
      if (s.line == kEmpty) return 0;
    }
  }
  // What the holders have (kept with Knobs::parallel, see hierarchy.cpp): M, the only holder
  // modified it; E, the only holder has it unmodified; S, every holder has it shared.
  Mesi state(uint64_t line) const {
    if (used_ == 0) return Mesi::E;
    for (size_t i = home(line);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.line == line) return s.state;
      if (s.line == kEmpty) return Mesi::E;
    }
  }
  // Sets the line's sharers and state; sharers 0 removes the line.
  void put(uint64_t line, uint64_t sharers, Mesi state = Mesi::E) {
    if (sharers == 0) return erase(line);
    if ((used_ + 1) * 2 > slots_.size()) grow();
    size_t i = home(line);
    for (;; i = (i + 1) & mask()) {
      Slot& s = slots_[i];
      if (s.line == line) {
        s.sharers = sharers;
        s.state = state;
        return;
      }
      if (s.line == kEmpty) break;
    }
    slots_[i] = Slot{line, sharers, state};
    ++used_;
  }
  size_t size() const { return used_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // never a line address
  struct Slot {
    uint64_t line = kEmpty;
    uint64_t sharers = 0;
    Mesi state = Mesi::E;
  };
  size_t mask() const { return slots_.size() - 1; }  // (used only once slots_ exist)
  size_t home(uint64_t line) const {
    return size_t((line * 0x9E3779B97F4A7C15ull) >> 32) & mask();
  }
  void erase(uint64_t line) {
    if (used_ == 0) return;
    size_t i = home(line);
    for (;; i = (i + 1) & mask()) {
      if (slots_[i].line == kEmpty) return;
      if (slots_[i].line == line) break;
    }
    for (size_t j = (i + 1) & mask();; j = (j + 1) & mask()) {
      if (slots_[j].line == kEmpty) break;
      const size_t h = home(slots_[j].line);
      const bool between = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (!between) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    --used_;
  }
  void grow() {
    std::vector<Slot> old(slots_.empty() ? 16 : slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.line == kEmpty) continue;
      size_t i = home(s.line);
      while (slots_[i].line != kEmpty) i = (i + 1) & mask();
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;  // power-of-two size, load factor <= 1/2
  size_t used_ = 0;
};

}  // namespace whymiss::sim
