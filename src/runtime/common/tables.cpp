#include "runtime/common/tables.h"

#include <cstring>

#include "runtime/common/heap.h"

namespace whymiss::rt {
namespace {

uint32_t hash32(uint64_t k, uint32_t cap) {
  return uint32_t((k * 0x9E3779B97F4A7C15ull) >> 40) & (cap - 1);
}

// Grows a (slots, records) pair to hold twice as many records. Records keep their indices.
template <typename Rec, typename KeyOf>
bool grow_pair(uint32_t*& slots, uint32_t& cap, Rec*& recs, uint32_t n, uint32_t& rcap,
               KeyOf key_of) {
  uint32_t nrcap = rcap ? rcap * 2 : 64;
  if (nrcap > (1u << 26)) return false;
  uint32_t ncap = nrcap * 2;
  auto* nrecs = static_cast<Rec*>(private_alloc(sizeof(Rec) * nrcap));
  auto* nslots = static_cast<uint32_t*>(private_alloc(sizeof(uint32_t) * ncap));
  if (!nrecs || !nslots) {
    if (nrecs) private_free(nrecs);
    if (nslots) private_free(nslots);
    return false;
  }
  if (n) std::memcpy(nrecs, recs, sizeof(Rec) * n);
  std::memset(nslots, 0, sizeof(uint32_t) * ncap);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t j = hash32(key_of(nrecs[i]), ncap);
    while (nslots[j]) j = (j + 1) & (ncap - 1);
    nslots[j] = i + 1;
  }
  if (recs) private_free(recs);
  if (slots) private_free(slots);
  recs = nrecs;
  slots = nslots;
  rcap = nrcap;
  cap = ncap;
  return true;
}

}  // namespace

profile::InstructionRecord* IpTable::insert(uint64_t ip) noexcept {
  if (n_ == rcap_) {
    if (!grow_pair(slots_, cap_, recs_, n_, rcap_,
                   [](const profile::InstructionRecord& r) { return r.ip; })) {
      ++dropped_;
      return nullptr;
    }
    forget_hot();  // the records moved: the cached pointers are stale
  }
  profile::InstructionRecord* r = &recs_[n_];
  std::memset(r, 0, sizeof *r);
  r->ip = ip;
  uint32_t j = slot_of(ip);
  while (slots_[j]) j = (j + 1) & (cap_ - 1);
  slots_[j] = ++n_;
  return r;
}

void IpTable::merge_from(const IpTable& o) noexcept {
  for (uint32_t i = 0; i < o.n_; ++i) {
    const profile::InstructionRecord& s = o.recs_[i];
    profile::InstructionRecord* d = get(s.ip);
    if (!d) {
      dropped_ += o.n_ - i;
      return;
    }
    d->accesses[0] += s.accesses[0];
    d->accesses[1] += s.accesses[1];
    for (int l = 0; l < profile::kLevels; ++l)
      for (int k = 0; k < profile::kKinds; ++k) d->misses[l][k] += s.misses[l][k];
    d->l1_set_mask |= s.l1_set_mask;
    bool more = s.object_count > uint32_t(profile::kRefs);
    for (int k = 0; k < profile::kRefs && s.objects[k]; ++k) more |= !add_ref(d->objects, s.objects[k]);
    uint32_t listed = 0;
    while (listed < uint32_t(profile::kRefs) && d->objects[listed]) ++listed;
    d->object_count = listed + ((more || d->object_count > listed) ? 1 : 0);
    for (int k = 0; k < profile::kRefs && s.sample_addrs[k]; ++k) add_ref(d->sample_addrs, s.sample_addrs[k]);
  }
  dropped_ += o.dropped_;
}

void IpTable::forget_hot() noexcept {
  for (Hot& h : hot_) h = Hot{0, nullptr};
}

void IpTable::release() noexcept {
  forget_hot();
  if (recs_) private_free(recs_);
  if (slots_) private_free(slots_);
  recs_ = nullptr;
  slots_ = nullptr;
  n_ = rcap_ = cap_ = 0;
}

StepTable::Entry* StepTable::lookup(uint64_t ip) noexcept {
  if (cap_) {
    for (uint32_t i = hash32(ip, cap_);; i = (i + 1) & (cap_ - 1)) {
      const uint32_t k = slots_[i];
      if (!k) break;
      if (recs_[k - 1].rec.ip == ip) return &recs_[k - 1];
    }
  }
  if (n_ == rcap_ &&
      !grow_pair(slots_, cap_, recs_, n_, rcap_, [](const Entry& e) { return e.rec.ip; })) {
    ++dropped_;
    return nullptr;
  }
  Entry* e = &recs_[n_];
  std::memset(e, 0, sizeof *e);
  e->rec.ip = ip;
  uint32_t j = hash32(ip, cap_);
  while (slots_[j]) j = (j + 1) & (cap_ - 1);
  slots_[j] = ++n_;
  return e;
}

void StepTable::merge_from(const StepTable& o) noexcept {
  for (uint32_t i = 0; i < o.n_; ++i) {
    const profile::StepRecord& s = o.recs_[i].rec;
    Entry* d = get(s.ip);
    if (!d) {
      dropped_ += o.n_ - i;
      return;
    }
    for (int k = 0; k < profile::kStepKinds; ++k) d->rec.steps[k] += s.steps[k];
    d->rec.pointer_checked += s.pointer_checked;
    if (s.stride) d->rec.stride = s.stride;
    d->rcd_first += o.recs_[i].rcd_first;
    for (int k = 0; k < profile::kRcdBuckets; ++k) d->rcd[k] += o.recs_[i].rcd[k];
  }
  dropped_ += o.dropped_;
}

void StepTable::export_to(profile::StepRecord* out) const noexcept {
  for (uint32_t i = 0; i < n_; ++i) out[i] = recs_[i].rec;
}

size_t StepTable::export_rcd(profile::RcdRecord* out, uint32_t l1_sets) const noexcept {
  size_t n = 0;
  for (uint32_t i = 0; i < n_; ++i) {
    const Entry& e = recs_[i];
    uint64_t any = e.rcd_first;
    for (uint64_t b : e.rcd) any |= b;
    if (!any) continue;
    profile::RcdRecord& r = out[n++];
    r.ip = e.rec.ip;
    r.source = profile::kRcdCounted;
    r.l1_sets = l1_sets;
    r.first = e.rcd_first;
    for (int k = 0; k < profile::kRcdBuckets; ++k) r.buckets[k] = e.rcd[k];
  }
  return n;
}

void StepTable::release() noexcept {
  if (recs_) private_free(recs_);
  if (slots_) private_free(slots_);
  recs_ = nullptr;
  slots_ = nullptr;
  n_ = rcap_ = cap_ = 0;
  last_ = nullptr;
}

profile::LineRecord* LineTable::find_or_insert(Stripe& s, uint64_t line, bool* fresh) noexcept {
  if (s.cap) {
    for (uint32_t i = hash32(line, s.cap);; i = (i + 1) & (s.cap - 1)) {
      uint32_t k = s.slots[i];
      if (!k) break;
      if (s.recs[k - 1].line == line) return &s.recs[k - 1];
    }
  }
  if (s.n == s.rcap &&
      !grow_pair(s.slots, s.cap, s.recs, s.n, s.rcap, [](const profile::LineRecord& r) { return r.line; }))
    return nullptr;
  profile::LineRecord* r = &s.recs[s.n];
  std::memset(r, 0, sizeof *r);
  r->line = line;
  for (auto& t : r->threads) t = profile::kNoThread;
  uint32_t j = hash32(line, s.cap);
  while (s.slots[j]) j = (j + 1) & (s.cap - 1);
  s.slots[j] = ++s.n;
  *fresh = true;
  return r;
}

size_t LineTable::size() const noexcept {
  size_t n = 0;
  for (const auto& s : stripes_) n += s.n;
  return n;
}

size_t LineTable::export_to(profile::LineRecord* out, size_t max) noexcept {
  size_t n = 0;
  for (auto& s : stripes_) {
    LockGuard g(s.lock);
    for (uint32_t i = 0; i < s.n && n < max; ++i) out[n++] = s.recs[i];
  }
  return n;
}

uint64_t LineTable::dropped() const noexcept {
  uint64_t d = 0;
  for (const auto& s : stripes_) d += s.dropped;
  return d;
}

void note_line_thread(profile::LineRecord& r, uint32_t thread, uint64_t mask, bool write) noexcept {
  int slot = -1;
  for (int i = 0; i < profile::kLineThreads; ++i) {
    if (r.threads[i] == thread) { slot = i; break; }
    if (r.threads[i] == profile::kNoThread) {
      r.threads[i] = thread;
      ++r.thread_count;
      slot = i;
      break;
    }
  }
  if (slot < 0) {  // more threads than slots: flagged as "more", masks not kept
    r.thread_count = profile::kLineThreads + 1;
    return;
  }
  (write ? r.write_mask : r.read_mask)[slot] |= mask;
}

}  // namespace whymiss::rt
