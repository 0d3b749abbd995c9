// One set-associative array (one level of one core, or the shared level). Entries keep the
// line address as tag, the MESI state, a dirty bit and the byte-granule mask this holder touched
// during its tenure. Callers hold the lock of the shard that owns the set.
//
// Lookups are the simulator's most frequent operation. For up to 16 ways each set also keeps a
// 16-byte row of one-byte fingerprints (0 = invalid way), compared with one SSE2 instruction:
// a lookup reads the row and then at most the tags the fingerprint matched, instead of walking
// every tag with a data-dependent exit (which mispredicts: the way a line sits in is random).
//
// With LRU and up to 16 ways, recency is a second 16-byte row next to the fingerprints: way w's
// rank (0 = most recent, ways-1 = least), a permutation of 0..ways-1. A touch and a victim are a
// few SSE2 instructions on that row, and a set's fingerprints and ranks share one 32-byte block
// (half a host line), where per-way 64-bit stamps took up to three host lines. Same victims as
// stamps: every way is touched when filled, so once all ways are valid (the only time a victim
// is asked for) rank order is touch order; never-touched ways rank below touched ones, in way
// order, just as equal zero stamps lost to any touched way.
#pragma once
#include <emmintrin.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/replacement.h"
#include "sim/sim.h"
#include "sim/zeroed.h"

namespace whymiss::sim {

class Cache {
 public:
  static constexpr uint64_t kInvalid = ~0ull;
  static Result<std::unique_ptr<Cache>> make(uint64_t sets, uint32_t ways, Policy p, uint64_t seed);

  // A power-of-two set count indexes by the line address' low bits; any other count (sysfs
  // reports 245,760 sets for some hashed-slice LLCs) by the address modulo the count, which
  // spreads lines as evenly, though the real slice hash is unknown.
  uint32_t set_of(uint64_t line) const {
    return uint32_t(__builtin_expect(pow2_, 1) ? line & set_mask_ : line % sets_);
  }
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
  // A hint that find(line) or a fill comes soon: starts loading the set's fingerprints and tags
  // (a 16-way set's tags span two or three host lines; the victim's may be in any of them).
  void prefetch(uint64_t line) const {
    const uint32_t set = set_of(line);
    if (rows_) __builtin_prefetch(row_ptr(set));
    const uint64_t* t = &tag_[size_t(set) * ways_];
    for (uint32_t w = 0; w < ways_; w += 8) __builtin_prefetch(t + w);
    __builtin_prefetch(t + ways_ - 1);
  }
  // The same for the set's entries (16 bytes a way), which a fill reads for its victim's dirty
  // bit: for the shared level, whose entries are a host cache miss.
  void prefetch_entries(uint64_t line) const {
    const Entry* e = &entry_[size_t(set_of(line)) * ways_];
    for (uint32_t w = 0; w < ways_; w += 4) __builtin_prefetch(e + w);
    __builtin_prefetch(e + ways_ - 1);
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
    const uint32_t set = set_of(tag_[idx]);
    touch_way(set, uint32_t(idx - size_t(set) * ways_));
  }
  // Puts `line` in way `idx` of `set` (set_of(line), as fill_slot was given) with entry `e`, and
  // makes it the set's most recent: set_tag, the entry and touch in one, for a fill that knows
  // its set. Whatever the way held is overwritten: the caller has evicted it (its tag, entry and
  // fingerprint need not be cleared first).
  void fill(size_t idx, uint32_t set, uint64_t line, const Entry& e) {
    const uint32_t way = uint32_t(idx - size_t(set) * ways_);
    tag_[idx] = line;
    if (rows_) row_ptr(set)[way] = fp_of(line);
    entry_[idx] = e;
    touch_way(set, way);
  }
  void touch_way(uint32_t set, uint32_t way) {
    switch (kind_) {  // devirtualised: the concrete policies are final
      case Kind::Ranks:
        touch_rank(set, way);
        break;
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
  uint64_t sets() const { return sets_; }
  uint32_t ways() const { return ways_; }

 private:
  Cache() = default;
  enum class Kind : uint8_t { Ranks, Lru, Plru, Random };
  uint32_t victim(uint32_t set) {
    switch (kind_) {
      case Kind::Ranks:
        return victim_rank(set);
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
  // A set's 32-byte block: fingerprints at +0, LRU ranks at +16 (Kind::Ranks only).
  uint8_t* row_ptr(uint32_t set) const { return meta_ + size_t(set) * 32; }
  // Bit w set: way w's fingerprint equals `fp` (padding ways past ways_ never match).
  uint32_t row_matches(uint32_t set, uint8_t fp) const {
    const __m128i row = _mm_load_si128(reinterpret_cast<const __m128i*>(row_ptr(set)));
    const __m128i eq = _mm_cmpeq_epi8(row, _mm_set1_epi8(char(fp)));
    return uint32_t(_mm_movemask_epi8(eq)) & way_mask_;
  }
  void set_fp(size_t idx, uint64_t line, uint8_t fp) {
    if (!rows_) return;
    const uint32_t set = set_of(line), way = uint32_t(idx - size_t(set) * ways_);
    row_ptr(set)[way] = fp;
  }
  // Ranks below the touched way's move one step older; the touched way becomes 0. Padding ways
  // hold 0x7F, never below or equal to a real rank (< 16), so they never change.
  void touch_rank(uint32_t set, uint32_t way) {
    __m128i* p = reinterpret_cast<__m128i*>(row_ptr(set) + 16);
    const __m128i row = _mm_load_si128(p);
    const __m128i r = _mm_set1_epi8(char(row_ptr(set)[16 + way]));
    const __m128i older = _mm_cmplt_epi8(row, r);  // all-ones bytes = -1: subtracting adds 1
    _mm_store_si128(p, _mm_andnot_si128(_mm_cmpeq_epi8(row, r), _mm_sub_epi8(row, older)));
  }
  uint32_t victim_rank(uint32_t set) const {
    const __m128i row = _mm_load_si128(reinterpret_cast<const __m128i*>(row_ptr(set) + 16));
    const __m128i eq = _mm_cmpeq_epi8(row, _mm_set1_epi8(char(ways_ - 1)));
    return uint32_t(__builtin_ctz(uint32_t(_mm_movemask_epi8(eq)) & way_mask_));
  }

  uint64_t set_mask_ = 0;  // sets_ - 1 when pow2_
  uint64_t sets_ = 0;
  bool pow2_ = true;
  unsigned set_bits_ = 0;
  uint32_t ways_ = 0;
  uint32_t way_mask_ = 0;
  bool rows_ = false;  // ways <= 16: fingerprint rows in use
  std::vector<uint64_t> tag_;
  ZeroedArray<Entry> entry_;  // Entry{} is all zero bytes (see Cache::make)
  std::vector<uint8_t> meta_buf_;  // rows_: 32 bytes per set, plus slack for alignment
  uint8_t* meta_ = nullptr;        // meta_buf_ aligned to 64: a set's block never straddles lines
  Kind kind_ = Kind::Lru;
  std::unique_ptr<Replacement> repl_;  // null for Kind::Ranks
};

}  // namespace whymiss::sim
