#include "sim/cache.h"

namespace whymiss::sim {

static_assert(Mesi::I == Mesi{0}, "a zeroed Entry must be Entry{}");

Result<std::unique_ptr<Cache>> Cache::make(uint64_t sets, uint32_t ways, Policy p, uint64_t seed) {
  std::unique_ptr<Cache> c(new Cache);
  c->set_mask_ = sets - 1;
  c->sets_ = sets;
  c->pow2_ = (sets & (sets - 1)) == 0;
  c->ways_ = ways;
  reserve_huge(c->tag_, sets * ways);
  c->tag_.assign(sets * ways, kInvalid);
  c->entry_ = make_zeroed<Entry>(sets * ways);
  while ((uint64_t(1) << c->set_bits_) < sets) ++c->set_bits_;
  c->rows_ = ways <= 16;
  c->way_mask_ = ways >= 32 ? ~0u : (1u << ways) - 1;
  // Mirrors Replacement::make's choice of class: tree-PLRU with one way is LRU.
  c->kind_ = p == Policy::Random                     ? Kind::Random
             : (p == Policy::TreePLRU && ways > 1) ? Kind::Plru
             : c->rows_                            ? Kind::Ranks
                                                   : Kind::Lru;
  if (c->rows_) {
    reserve_huge(c->meta_buf_, sets * 32 + 64);
    c->meta_buf_.assign(sets * 32 + 64, 0);
    c->meta_ = c->meta_buf_.data() + (-uintptr_t(c->meta_buf_.data()) & 63);
    if (c->kind_ == Kind::Ranks)
      for (uint64_t s = 0; s < sets; ++s)
        for (uint32_t w = 0; w < 16; ++w) c->row_ptr(uint32_t(s))[16 + w] = uint8_t(w < ways ? w : 0x7F);
  }
  // (Kind::Ranks keeps recency in the rows: no separate state, whose per-way stamps would cost
  // more than the tags.)
  if (c->kind_ != Kind::Ranks) {
    auto repl = Replacement::make(p, sets, ways, seed);
    if (!repl) return Error{repl.error()};
    c->repl_ = std::move(repl.value());
  }
  return c;
}

}  // namespace whymiss::sim
