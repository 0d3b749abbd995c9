#include "sim/departures.h"

namespace whymiss::sim {

void DepartureTable::set(uint64_t line, uint32_t core, const Departure& d) {
  if ((used_ + 1) * 2 > slots_.size()) grow();
  size_t i = home(line, core);
  for (;; i = (i + 1) & mask()) {
    Slot& s = slots_[i];
    if (s.line == kEmpty) break;
    if (s.line == line && s.core == core) {
      s.d = d;
      return;
    }
  }
  slots_[i] = Slot{line, core, d};
  ++used_;
  ++present_[bucket(hash(line, core))];
}

void DepartureTable::erase(uint64_t line, uint32_t core) {
  if (present_[bucket(hash(line, core))] == 0) return;
  size_t i = home(line, core);
  for (;; i = (i + 1) & mask()) {
    const Slot& s = slots_[i];
    if (s.line == kEmpty) return;
    if (s.line == line && s.core == core) break;
  }
  // Backward-shift deletion: move later members of the probe chain into the hole, so lookups
  // never need tombstones.
  for (size_t j = (i + 1) & mask();; j = (j + 1) & mask()) {
    if (slots_[j].line == kEmpty) break;
    size_t h = home(slots_[j].line, slots_[j].core);
    bool between = (i <= j) ? (i < h && h <= j) : (i < h || h <= j);
    if (!between) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = Slot{};
  --used_;
  --present_[bucket(hash(line, core))];
}

void DepartureTable::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  for (const Slot& s : old) {
    if (s.line == kEmpty) continue;
    size_t i = home(s.line, s.core);
    while (slots_[i].line != kEmpty) i = (i + 1) & mask();
    slots_[i] = s;
  }
}

}  // namespace whymiss::sim
