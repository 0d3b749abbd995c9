// One line size's LRU stack for exact mode's reuse-distance tracker (reuse.h): for each access
// to a line, the number of distinct lines used since its previous access (its stack distance).
//
// How: every followed line has one marker, at the time of its last access (times tick once per
// access the stack sees). A line's distance is the number of markers after its own. The markers
// are a bitmap over times; blocks of 512 times (one cache line of the bitmap) keep their marker
// counts, and a Fenwick tree over the settled blocks (all but the kNear + 1 latest) answers "how
// many markers up to block b" in log2(blocks) steps of a small array. A reuse from inside the
// latest blocks counts bits and block counts directly, and touches no tree (within 64 times: two
// words of the bitmap).
//   line -> time of last access is a shadow table: 4 bytes per line, in chunks of 4 Mi lines
// mapped on first touch (zero-filled, MAP_NORESERVE: only the pages of lines the program used
// take memory, 1/16 of the program's footprint at 64-byte lines; huge pages past kHugeLines
// lines). No hashing, no probing. Lines past the chunks' reach (addresses above 2^48, or more
// than kMaxChunks chunks) are dropped and counted.
//   Times run out at the bitmap's end: the markers are renumbered 1..live in order (compaction,
// through rev_: time -> the line's shadow slot), and the time arrays double when the markers
// filled more than half of them (they start short: rev_ is written at every access, and arrays
// far longer than the footprint would sweep the caches). Memory: the shadow, plus 4.1 bytes per
// time slot, 2-4 slots per line followed.
//
// Bound: past `max_lines` lines followed (or when memory cannot be had), the stack falls back to
// spatial sampling (SHARDS): it follows only lines whose hash is under a threshold, halving it
// until the lines fit; each such access then stands for 1/rate accesses.
//
// Not thread-safe: the caller serialises access() (reuse.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

// The hot path is forced inline: reuse.cpp inlines it into a function built with popcnt.
#define WHYMISS_REUSE_INLINE inline __attribute__((always_inline))

namespace whymiss::rt::reuse {

// Memory for the stacks (reuse.cpp: the runtime's private heap; a test may link its own).
// Zero-filled; nullptr when none can be had.
void* stack_alloc(size_t bytes) noexcept;
void stack_free(void* p, size_t bytes) noexcept;
// Address space, zero-filled and backed page by page on first touch (MAP_NORESERVE).
void* stack_reserve(size_t bytes) noexcept;

// Per word j of a marker block (8 words of 64 times), masks for its 8 words: all ones for those
// after word j.
struct LaterWords {
  uint64_t m[8][8];
  constexpr LaterWords() : m{} {
    for (unsigned j = 0; j < 8; ++j)
      for (unsigned i = 0; i < 8; ++i) m[j][i] = i > j ? ~uint64_t(0) : 0;
  }
};
alignas(64) inline constexpr LaterWords kLaterWords{};

class LruStack {
 public:
  static constexpr int64_t kCold = -1;         // first access to the line
  static constexpr int64_t kNotFollowed = -2;  // not sampled, or beyond the shadow (counted)
  static constexpr unsigned kChunkBits = 22;   // lines per shadow chunk: 4 Mi (16 MiB of stamps)
  static constexpr unsigned kMaxChunks = 1024; // a time's owner: chunk (10 bits) | slot (22 bits)
  static constexpr unsigned kBlockBits = 9;    // times per block: 512 (64 bytes of bitmap)
  static constexpr unsigned kWords = 1u << (kBlockBits - 6);
  static constexpr unsigned kHashBits = 24;
  // Blocks this close to now's are not in the tree yet (a reuse from them, the common case, costs
  // no tree walk); older ones are "settled" in it.
  static constexpr unsigned kNear = 8;
  static constexpr uint32_t kMinTimes = 4096;  // the time arrays' first length
  static constexpr uint32_t kHugeLines = 1u << 16;  // lines followed before the shadow asks for THP

  // `line_bits`: bits of a line number (48 - log2 line size for x86-64 user addresses).
  // `rate_shift`: follow 1 line in 2^rate_shift from the start (0: every line). `first_times`:
  // the time arrays' first length (a power of two, >= 512; tests make it small to exercise
  // renumbering and growth).
  bool init(unsigned line_bits, uint32_t max_lines, unsigned rate_shift,
            uint32_t first_times = kMinTimes) noexcept;

  // The access's distance, kCold, or kNotFollowed.
  WHYMISS_REUSE_INLINE int64_t access(uint64_t line) noexcept;

  // Share of lines followed: 1 while every line is.
  double rate() const noexcept { return double(threshold_) / double(uint32_t(1) << kHashBits); }
  bool sampling() const noexcept { return threshold_ != (uint32_t(1) << kHashBits); }
  // 1/rate: how many accesses one followed access stands for (a power of two: the threshold is).
  uint64_t weight() const noexcept { return weight_; }
  bool follows(uint64_t line) const noexcept { return hash_of(line) < threshold_; }
  uint64_t dropped() const noexcept { return dropped_; }  // lines beyond the shadow, or no chunk
  uint32_t live() const noexcept { return live_; }

  static uint32_t hash_of(uint64_t line) noexcept {
    return uint32_t((line * 0x9E3779B97F4A7C15ull) >> (64 - kHashBits));
  }

 private:
  WHYMISS_REUSE_INLINE uint32_t* slot_of(uint64_t line, uint32_t* owner) noexcept;
  uint32_t* map_chunk(uint64_t dir_index) noexcept;
  static void to_huge_pages(uintptr_t chunk) noexcept;
  uint32_t* slot_of_owner(uint32_t owner) const noexcept {
    return reinterpret_cast<uint32_t*>(dir_[chunk_dir_[owner >> kChunkBits]] & ~uintptr_t(4095)) +
           (owner & ((uint32_t(1) << kChunkBits) - 1));
  }
  uint64_t line_of_owner(uint32_t owner) const noexcept {
    return (uint64_t(chunk_dir_[owner >> kChunkBits]) << kChunkBits) | (owner & ((uint32_t(1) << kChunkBits) - 1));
  }
  WHYMISS_REUSE_INLINE uint64_t markers_after(uint32_t t) const noexcept;
  WHYMISS_REUSE_INLINE void remove(uint32_t t) noexcept;
  WHYMISS_REUSE_INLINE void place(uint32_t* slot, uint32_t owner) noexcept;
  WHYMISS_REUSE_INLINE void settle() noexcept;
  WHYMISS_REUSE_INLINE void fen_add(uint32_t block, int32_t v) noexcept {
    for (uint32_t i = block + 1; i <= nblocks_; i += i & -i) fen_[i] += v;
  }
  WHYMISS_REUSE_INLINE uint32_t fen_prefix(uint32_t blocks) const noexcept {  // markers in blocks [0, blocks)
    int64_t s = 0;
    for (uint32_t i = blocks; i > 0; i -= i & -i) s += fen_[i];
    return uint32_t(s);
  }
  void out_of_times() noexcept;
  bool renumber(uint32_t new_tmax) noexcept;  // compaction, into arrays of new_tmax times
  void shrink(uint32_t limit) noexcept;  // halve the threshold until at most `limit` lines remain

  uintptr_t* dir_ = nullptr;       // line >> kChunkBits -> chunk address | chunk index (0: none)
  uint64_t ndir_ = 0;
  uint32_t chunk_dir_[kMaxChunks] = {};  // chunk index -> its directory index
  uint32_t nchunks_ = 0;
  uint64_t* bits_ = nullptr;  // one bit per time: a line's last access (one word more, 0)
  uint32_t* rev_ = nullptr;   // time -> owner (chunk index << kChunkBits | slot)
  uint32_t* cnt_ = nullptr;   // markers per block (kNear + 1 more, always 0)
  int32_t* fen_ = nullptr;    // Fenwick tree over settled blocks' counts, 1-based
  uint32_t tmax_ = 0, nblocks_ = 0, now_ = 1, live_ = 0, max_ = 0;
  uint32_t threshold_ = uint32_t(1) << kHashBits;
  uint64_t weight_ = 1;
  uint64_t dropped_ = 0;
  bool huge_ = false;
};

WHYMISS_REUSE_INLINE uint32_t* LruStack::slot_of(uint64_t line, uint32_t* owner) noexcept {
  const uint64_t d = line >> kChunkBits;
  if (__builtin_expect(d >= ndir_, 0)) return nullptr;
  uintptr_t e = dir_[d];
  uint32_t* base;
  if (__builtin_expect(e != 0, 1)) {
    base = reinterpret_cast<uint32_t*>(e & ~uintptr_t(4095));
  } else {
    base = map_chunk(d);
    if (!base) return nullptr;
    e = dir_[d];
  }
  const uint32_t off = uint32_t(line) & ((uint32_t(1) << kChunkBits) - 1);
  *owner = (uint32_t(e & 4095) << kChunkBits) | off;
  return base + off;
}

WHYMISS_REUSE_INLINE uint64_t LruStack::markers_after(uint32_t t) const noexcept {
  const uint64_t after = ~uint64_t(1) << (t & 63);  // bits after t in its word
  // Within 64 times of now: t's word and the next (zero past now; one word of padding).
  if (now_ - t <= 64) {
    const uint64_t* w = bits_ + (t >> 6);
    return __builtin_popcountll(w[0] & after) + __builtin_popcountll(w[1]);
  }
  const uint32_t tb = t >> kBlockBits, nb = now_ >> kBlockBits;
  const uint64_t* w = bits_ + (size_t(tb) << (kBlockBits - 6));
  const unsigned wi = (t >> 6) & (kWords - 1);
  // The words after t's through a mask table, not a conditional per word, which the compiler made
  // a branch that reuse distances (as unpredictable as the program's accesses) mispredicted: 3.3 M
  // times in 5 M of lz4's accesses, cachegrind's branch simulation says.
  uint64_t c = __builtin_popcountll(w[wi] & after);
  static_assert(kWords == 8, "kLaterWords is for blocks of 8 words");
  const uint64_t* later = kLaterWords.m[wi];
#pragma GCC unroll 8
  for (unsigned i = 0; i < kWords; ++i) c += __builtin_popcountll(w[i] & later[i]);
  if (tb + kNear >= nb) {  // near: the next kNear blocks' counts (those after now's are 0)
    uint32_t s = 0;
#pragma GCC unroll 8
    for (unsigned b = 1; b <= kNear; ++b) s += cnt_[tb + b];
    return c + s;
  }
  return c + live_ - fen_prefix(tb + 1);  // far: every block up to tb is settled
}

WHYMISS_REUSE_INLINE void LruStack::remove(uint32_t t) noexcept {
  bits_[t >> 6] &= ~(uint64_t(1) << (t & 63));
  const uint32_t b = t >> kBlockBits;
  --cnt_[b];
  if (b + kNear < (now_ >> kBlockBits)) fen_add(b, -1);
}

WHYMISS_REUSE_INLINE void LruStack::place(uint32_t* slot, uint32_t owner) noexcept {
  const uint32_t t = now_++;
  *slot = t;
  rev_[t] = owner;
  bits_[t >> 6] |= uint64_t(1) << (t & 63);
  ++cnt_[t >> kBlockBits];
  if ((now_ & ((uint32_t(1) << kBlockBits) - 1)) == 0) settle();
}

WHYMISS_REUSE_INLINE void LruStack::settle() noexcept {  // now_ entered a new block: one more settles
  const uint32_t nb = now_ >> kBlockBits;
  if (nb > kNear) fen_add(nb - kNear - 1, int32_t(cnt_[nb - kNear - 1]));
}

WHYMISS_REUSE_INLINE int64_t LruStack::access(uint64_t line) noexcept {
  if (__builtin_expect(threshold_ != (uint32_t(1) << kHashBits), 0) && hash_of(line) >= threshold_)
    return kNotFollowed;
  uint32_t owner;
  uint32_t* slot = slot_of(line, &owner);
  if (__builtin_expect(slot == nullptr, 0)) {
    ++dropped_;
    return kNotFollowed;
  }
  const uint32_t t = *slot;
  if (__builtin_expect(t != 0 && now_ != tmax_, 1)) {  // a reuse, the common case: move the marker
    const int64_t d = int64_t(markers_after(t));
    const uint32_t n = now_++, tb = t >> kBlockBits, nb = n >> kBlockBits;
    bits_[t >> 6] &= ~(uint64_t(1) << (t & 63));
    bits_[n >> 6] |= uint64_t(1) << (n & 63);
    --cnt_[tb];  // (both, without a branch on whether the blocks differ)
    ++cnt_[nb];
    if (tb + kNear < nb) fen_add(tb, -1);
    *slot = n;
    rev_[n] = owner;
    if ((now_ & ((uint32_t(1) << kBlockBits) - 1)) == 0) settle();
    return d;
  }
  int64_t d;
  if (t != 0) {
    d = int64_t(markers_after(t));
    remove(t);
  } else {
    d = kCold;
    ++live_;
  }
  if (__builtin_expect(now_ == tmax_, 0)) {
    *slot = 0;  // (its marker is gone: compaction must not see a stale time)
    out_of_times();
    if (threshold_ != (uint32_t(1) << kHashBits) && hash_of(line) >= threshold_) {  // shrunk past it
      --live_;
      return kNotFollowed;
    }
  }
  place(slot, owner);
  if (__builtin_expect(live_ > max_, 0)) shrink(max_);
  return d;
}

}  // namespace whymiss::rt::reuse
