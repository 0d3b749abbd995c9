// One set-associative array (one level of one core, or the shared level). Entries keep the
// line address as tag, the MESI state, a dirty bit and the byte-granule mask this holder touched
// during its tenure. Callers hold the lock of the shard that owns the set.
//
// Lookups are the simulator's most frequent operation. For up to 16 ways each set also keeps a
// 16-byte row of one-byte fingerprints (0 = invalid way), compared with one SSE2 instruction:
// a lookup reads the row and then at most the tags the fingerprint matched, instead of walking
// every tag with a data-dependent exit (which mispredicts: the way a line sits in is random).
#pragma once
#include <emmintrin.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/replacement.h"
#include "sim/sim.h"

namespace whymiss::sim {

class Cache {
 public:
  static constexpr uint64_t kInvalid = ~0ull;
  static Result<std::unique_ptr<Cache>> make(uint64_t sets, uint32_t ways, Policy p, uint64_t seed);

  uint32_t set_of(uint64_t line) const { return uint32_t(line & set_mask_); }
  // Index of `line` in the flat arrays, or -1.
  int64_t find(uint64_t line) const {
    const uint32_t set = set_of(line);
    const size_t base = size_t(set) * ways_;
    const uint64_t* t = &tag_[base];
    if (rows_) {
      for (uint32_t m = row_matches(set, fp_of(line)); m; m &= m - 1) {
        const uint32_t w = uint32_t(__builtin_ctz(m));
        if (t[w] == line) return int64_t(base + w);
      }
      return -1;
    }
    for (uint32_t w = 0; w < ways_; ++w)
      if (t[w] == line) return int64_t(base + w);
    return -1;
  }
  // A hint that find(line) or a fill comes soon: starts loading the set's fingerprints and tags.
  void prefetch(uint64_t line) const {
    if (rows_) __builtin_prefetch(&fp_[size_t(set_of(line)) * 16]);
    __builtin_prefetch(&tag_[size_t(set_of(line)) * ways_]);
  }
  // Where to put a new line of `set`: an invalid way if any (the lowest), else the policy's
  // victim.
  size_t fill_slot(uint32_t set) {
    const size_t base = size_t(set) * ways_;
    if (rows_) {
      if (uint32_t m = row_matches(set, 0)) return base + uint32_t(__builtin_ctz(m));
      return base + victim(set);
    }
    for (uint32_t w = 0; w < ways_; ++w)
      if (tag_[base + w] == kInvalid) return base + w;
    return base + victim(set);
  }
  // `idx` holds a valid line (just hit or filled): its set comes from the tag, not a division.
  void touch(size_t idx) {
    const uint32_t set = set_of(tag_[idx]), way = uint32_t(idx - size_t(set) * ways_);
    switch (kind_) {  // devirtualised: the concrete policies are final
      case Kind::Lru:
        static_cast<Lru*>(repl_.get())->touch(set, way);
        break;
      case Kind::Plru:
        static_cast<TreePlru*>(repl_.get())->touch(set, way);
        break;
      case Kind::Random:
        break;  // random replacement keeps no recency
    }
  }
  void invalidate(size_t idx) {
    set_fp(idx, tag_[idx], 0);
    tag_[idx] = kInvalid;
    entry_[idx] = Entry{};
  }
  // Puts `line` in way `idx` (which must be invalid; the caller evicted its previous line).
  void set_tag(size_t idx, uint64_t line) {
    tag_[idx] = line;
    set_fp(idx, line, fp_of(line));
  }

  uint64_t tag(size_t idx) const { return tag_[idx]; }
  const uint64_t* tag_ptr(size_t idx) const { return &tag_[idx]; }  // stable: never reallocated
  Entry& entry(size_t idx) { return entry_[idx]; }
  uint64_t sets() const { return set_mask_ + 1; }
  uint32_t ways() const { return ways_; }

 private:
  Cache() = default;
  enum class Kind : uint8_t { Lru, Plru, Random };
  uint32_t victim(uint32_t set) {
    switch (kind_) {
      case Kind::Lru:
        return static_cast<Lru*>(repl_.get())->victim(set);
      case Kind::Plru:
        return static_cast<TreePlru*>(repl_.get())->victim(set);
      case Kind::Random:
        return static_cast<RandomPolicy*>(repl_.get())->victim(set);
    }
    return 0;
  }
  // The fingerprint of a line: the tag bits just above the set index, never 0 (0 = invalid).
  uint8_t fp_of(uint64_t line) const {
    const uint8_t f = uint8_t(line >> set_bits_);
    return f ? f : 1;
  }
  // Bit w set: way w's fingerprint equals `fp` (padding ways past ways_ never match).
  uint32_t row_matches(uint32_t set, uint8_t fp) const {
    const __m128i row = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&fp_[size_t(set) * 16]));
    const __m128i eq = _mm_cmpeq_epi8(row, _mm_set1_epi8(char(fp)));
    return uint32_t(_mm_movemask_epi8(eq)) & way_mask_;
  }
  void set_fp(size_t idx, uint64_t line, uint8_t fp) {
    if (!rows_) return;
    const uint32_t set = set_of(line), way = uint32_t(idx - size_t(set) * ways_);
    fp_[size_t(set) * 16 + way] = fp;
  }

  uint64_t set_mask_ = 0;
  unsigned set_bits_ = 0;
  uint32_t ways_ = 0;
  uint32_t way_mask_ = 0;
  bool rows_ = false;  // ways <= 16: fingerprint rows in use
  std::vector<uint64_t> tag_;
  std::vector<Entry> entry_;
  std::vector<uint8_t> fp_;  // rows_: 16 per set
  Kind kind_ = Kind::Lru;
  std::unique_ptr<Replacement> repl_;
};

}  // namespace whymiss::sim
