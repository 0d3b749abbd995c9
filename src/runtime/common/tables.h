// Aggregation tables of the runtime, in private-heap memory: per-instruction statistics (one
// table per thread, merged at thread exit) and per-cache-line sharing evidence (shared, striped).
// They grow by doubling; when memory runs out they drop and count instead of failing.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/profile.h"
#include "runtime/common/spinlock.h"

namespace whymiss::rt {

// Not thread-safe: one owner (a thread, or the merged table under its lock).
class IpTable {
 public:
  // The record for `ip`, created zeroed on first use; nullptr when memory ran out.
  profile::InstructionRecord* get(uint64_t ip) noexcept {
    if (profile::InstructionRecord* r = find(ip)) return r;
    return insert(ip);
  }
  // find() limited to its cache: nullptr also when `ip` has a record that is not cached.
  profile::InstructionRecord* find_hot(uint64_t ip) noexcept {
    const Hot& h = hot_[hot_of(ip)];
    return h.ip == ip ? h.rec : nullptr;
  }
  // The record for `ip` if it has one; never allocates. A direct-mapped cache of recent ips sits
  // in front of the hash table: a loop's few instructions then cost one load each.
  profile::InstructionRecord* find(uint64_t ip) noexcept {
    Hot& h = hot_[hot_of(ip)];
    if (h.ip == ip && h.rec) return h.rec;
    if (cap_) {
      for (uint32_t i = slot_of(ip);; i = (i + 1) & (cap_ - 1)) {
        uint32_t s = slots_[i];
        if (s == 0) break;
        if (recs_[s - 1].ip == ip) {
          h = Hot{ip, &recs_[s - 1]};
          return h.rec;
        }
      }
    }
    return nullptr;
  }
  void merge_from(const IpTable& o) noexcept;
  size_t size() const noexcept { return n_; }
  const profile::InstructionRecord* records() const noexcept { return recs_; }
  uint64_t dropped() const noexcept { return dropped_; }
  void release() noexcept;  // frees its memory; the table is empty afterwards

 private:
  uint32_t slot_of(uint64_t ip) const noexcept {
    return uint32_t((ip * 0x9E3779B97F4A7C15ull) >> 40) & (cap_ - 1);
  }
  profile::InstructionRecord* insert(uint64_t ip) noexcept;
  bool grow() noexcept;
  static uint32_t hot_of(uint64_t ip) noexcept { return uint32_t(ip ^ (ip >> 6)) & (kHot - 1); }
  void forget_hot() noexcept;  // after recs_ moved or was freed

  struct Hot {
    uint64_t ip;
    profile::InstructionRecord* rec;  // nullptr = empty
  };
  static constexpr uint32_t kHot = 64;
  Hot hot_[kHot] = {};

  uint32_t* slots_ = nullptr;  // 1-based index into recs_, 0 = empty
  uint32_t cap_ = 0;           // slots, power of two, at least 2 * rcap_
  profile::InstructionRecord* recs_ = nullptr;
  uint32_t n_ = 0, rcap_ = 0;
  uint64_t dropped_ = 0;
};

// How each instruction's L1 misses step through memory (profile::StepRecord), with the state
// that classifies the next step. Only misses reach it. Not thread-safe, like IpTable.
class StepTable {
 public:
  struct Entry {
    profile::StepRecord rec;
    uint64_t last_line;  // this instruction's previous miss in the owning thread; 0 = none yet
    int64_t last_delta;  // its step, in lines
    // Re-conflict distances of this instruction's L1 misses (profile::RcdRecord's counts).
    uint64_t rcd_first;
    uint64_t rcd[profile::kRcdBuckets];
  };
  // The entry for `ip`, created zeroed on first use; nullptr when memory ran out. The last
  // entry found is remembered: a loop whose misses come from one instruction pays a compare,
  // not a hash probe (~40 instructions), per miss.
  Entry* get(uint64_t ip) noexcept {
    if (ip == last_ip_ && last_ != nullptr) return last_;
    Entry* e = lookup(ip);
    last_ip_ = ip;
    last_ = e;
    return e;
  }
  // Adds o's counts (the latest stride wins); the per-thread state is not merged.
  void merge_from(const StepTable& o) noexcept;
  size_t size() const noexcept { return n_; }
  // Copies the records into out (room for size()).
  void export_to(profile::StepRecord* out) const noexcept;
  // The instructions with re-conflict distances, as RcdRecords (source kRcdCounted, l1_sets
  // as given) into out (room for size()); returns how many.
  size_t export_rcd(profile::RcdRecord* out, uint32_t l1_sets) const noexcept;
  uint64_t dropped() const noexcept { return dropped_; }
  void release() noexcept;

 private:
  Entry* lookup(uint64_t ip) noexcept;  // get() past its memo
  uint32_t* slots_ = nullptr;  // 1-based index into recs_, 0 = empty
  uint32_t cap_ = 0;
  Entry* recs_ = nullptr;
  uint32_t n_ = 0, rcap_ = 0;
  uint64_t dropped_ = 0;
  // get()'s memo: rewritten by every lookup (where recs_ may move), cleared by release().
  uint64_t last_ip_ = 0;
  Entry* last_ = nullptr;
};

// Adds `v` to the small list `list` of capacity profile::kRefs (zero = empty slot) unless
// present; returns false when the list is full and v is new.
inline bool add_ref(uint64_t* list, uint64_t v) noexcept {
  for (int i = 0; i < profile::kRefs; ++i) {
    if (list[i] == v) return true;
    if (list[i] == 0) {
      list[i] = v;
      return true;
    }
  }
  return false;
}

// Lines with coherence misses. Thread-safe: striped by line.
class LineTable {
 public:
  static constexpr int kStripes = 64;
  // Runs fn on the record of `line` under its stripe lock; `fresh` is true when it was just
  // created (zeroed, line set, threads marked unused). Returns false when memory ran out.
  template <typename F>
  bool update(uint64_t line, F&& fn) noexcept {
    Stripe& s = stripes_[line % kStripes];
    LockGuard g(s.lock);
    bool fresh = false;
    profile::LineRecord* r = find_or_insert(s, line, &fresh);
    if (!r) {
      ++s.dropped;
      return false;
    }
    fn(*r, fresh);
    return true;
  }
  size_t size() const noexcept;
  // Copies every record into out (capacity `max`), taking each stripe lock in turn.
  size_t export_to(profile::LineRecord* out, size_t max) noexcept;
  uint64_t dropped() const noexcept;

 private:
  struct Stripe {
    SpinLock lock;
    profile::LineRecord* recs = nullptr;
    uint32_t* slots = nullptr;
    uint32_t n = 0, rcap = 0, cap = 0;
    uint64_t dropped = 0;
  };
  profile::LineRecord* find_or_insert(Stripe& s, uint64_t line, bool* fresh) noexcept;
  Stripe stripes_[kStripes];
};

// Records that thread `thread` touched `mask` of the line (as a writer or a reader).
void note_line_thread(profile::LineRecord& r, uint32_t thread, uint64_t mask, bool write) noexcept;

}  // namespace whymiss::rt
