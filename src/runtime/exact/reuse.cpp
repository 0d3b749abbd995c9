#include "runtime/exact/reuse.h"

#include <algorithm>
#include <cstring>

#include "runtime/common/heap.h"
#include "runtime/common/spinlock.h"

namespace whymiss::rt::reuse {
namespace {

constexpr uint32_t kHashBits = 24, kHashOne = 1u << kHashBits;

uint32_t hash_of(uint64_t line) { return uint32_t((line * 0x9E3779B97F4A7C15ull) >> (64 - kHashBits)); }

template <typename T>
T* alloc_zeroed(size_t n) {
  void* p = private_alloc(sizeof(T) * n);
  if (p) std::memset(p, 0, sizeof(T) * n);
  return static_cast<T*>(p);
}

// One line size's LRU stack: line -> time of last use (open addressing, backward-shift
// deletion), and a Fenwick tree over times marking each followed line's last use, so that the
// number of lines used since time t is live - prefix(t).
class Stack {
 public:
  bool init(uint32_t max_lines, unsigned rate_shift) {
    max_ = max_lines;
    threshold_ = kHashOne >> std::min(rate_shift, kHashBits);
    cap_ = 1;
    while (cap_ < 2 * max_lines) cap_ <<= 1;
    tmax_ = 4 * max_lines;
    keys_ = alloc_zeroed<uint64_t>(cap_);
    stamps_ = alloc_zeroed<uint32_t>(cap_);
    tree_ = alloc_zeroed<int32_t>(tmax_ + 1);
    order_ = alloc_zeroed<uint64_t>(cap_);  // live_ <= cap_ always, whatever shrink() removed
    return keys_ && stamps_ && tree_ && order_;
  }
  // Distance in lines (scaled by 1/rate), or -1 for a first access; `weight` gets 1/rate. False
  // when the line is not followed (not sampled).
  bool access(uint64_t line, double* distance, double* weight) {
    if (hash_of(line) >= threshold_) return false;
    const double scale = double(kHashOne) / double(threshold_);
    *weight = scale;
    if (now_ > tmax_) compact();
    uint32_t i = slot_of(line);
    for (; keys_[i] != 0; i = (i + 1) & (cap_ - 1)) {
      if (keys_[i] != line + 1) continue;
      const uint32_t t = stamps_[i];
      *distance = double(live_ - prefix(t)) * scale;
      add(t, -1);
      stamps_[i] = now_;
      add(now_++, +1);
      return true;
    }
    *distance = -1;
    keys_[i] = line + 1;
    stamps_[i] = now_;
    add(now_++, +1);
    if (++live_ > max_) shrink();  // (a halving that drops nothing is retried at the next line)
    return true;
  }
  double rate() const { return double(threshold_) / double(kHashOne); }
  bool follows(uint64_t line) const { return hash_of(line) < threshold_; }

 private:
  uint32_t slot_of(uint64_t line) const { return uint32_t((line * 0xD6E8FEB86659FD93ull) >> 40) & (cap_ - 1); }
  void add(uint32_t t, int32_t v) {
    for (; t <= tmax_; t += t & -t) tree_[t] += v;
  }
  uint32_t prefix(uint32_t t) const {
    int64_t s = 0;
    for (; t > 0; t -= t & -t) s += tree_[t];
    return uint32_t(s);
  }
  // Times ran out: renumber the followed lines' last uses 1..live in the same order.
  void compact() {
    uint32_t n = 0;
    for (uint32_t i = 0; i < cap_; ++i)
      if (keys_[i]) order_[n++] = (uint64_t(stamps_[i]) << 32) | i;
    std::sort(order_, order_ + n);
    std::memset(tree_, 0, sizeof(int32_t) * (tmax_ + 1));
    for (uint32_t k = 0; k < n; ++k) {
      stamps_[uint32_t(order_[k])] = k + 1;
      add(k + 1, +1);
    }
    now_ = n + 1;
  }
  // The table is full: follow half as many lines (halve the hash threshold) and forget the others.
  void shrink() {
    threshold_ /= 2;
    for (uint32_t i = 0; i < cap_;) {
      if (keys_[i] && hash_of(keys_[i] - 1) >= threshold_) {
        add(stamps_[i], -1);
        --live_;
        erase(i);  // the slot now holds a shifted entry, or is empty: look at it again
      } else {
        ++i;
      }
    }
  }
  void erase(uint32_t i) {
    for (uint32_t j = (i + 1) & (cap_ - 1); keys_[j] != 0; j = (j + 1) & (cap_ - 1)) {
      const uint32_t home = slot_of(keys_[j] - 1);
      // Move j back to i when its home does not lie in (i, j] cyclically.
      if (((j - home) & (cap_ - 1)) >= ((j - i) & (cap_ - 1))) {
        keys_[i] = keys_[j];
        stamps_[i] = stamps_[j];
        i = j;
      }
    }
    keys_[i] = 0;
  }

  uint64_t* keys_ = nullptr;  // line + 1; 0 = empty
  uint32_t* stamps_ = nullptr;
  int32_t* tree_ = nullptr;
  uint64_t* order_ = nullptr;
  uint32_t cap_ = 0, max_ = 0, tmax_ = 0, live_ = 0, now_ = 1;
  uint32_t threshold_ = kHashOne;
};

struct Histogram {
  double cold = 0, weighted = 0;
  double buckets[profile::kReuseBuckets];
  void add(double distance, double weight) {
    weighted += weight;
    if (distance < 0) cold += weight;
    else buckets[profile::reuse_bucket(uint64_t(distance))] += weight;
  }
};

struct State {
  bool on = false;
  unsigned line_shift = 6;
  SpinLock lock;
  Stack stacks[2];  // line sizes: simulated, twice it
  Histogram* program = nullptr;  // [2]
  // Instructions with their own histogram: ip -> index (open addressing, first come).
  uint64_t* ips = nullptr;  // ip + 1; 0 = empty
  uint32_t* slots = nullptr;
  Histogram* per_ip = nullptr;
  uint32_t ip_cap = 0, nips = 0, max_ips = 0;
};
State g;

Histogram* histogram_of(uint64_t ip) {
  uint32_t i = uint32_t((ip * 0x9E3779B97F4A7C15ull) >> 40) & (g.ip_cap - 1);
  for (; g.ips[i] != 0; i = (i + 1) & (g.ip_cap - 1))
    if (g.ips[i] == ip + 1) return &g.per_ip[g.slots[i]];
  if (g.nips == g.max_ips) return nullptr;
  g.ips[i] = ip + 1;
  g.slots[i] = g.nips;
  return &g.per_ip[g.nips++];
}

}  // namespace

bool start(unsigned line_shift, const Knobs& k) {
  g.line_shift = line_shift;
  g.max_ips = k.max_instructions;
  g.ip_cap = 1;
  while (g.ip_cap < 2 * k.max_instructions) g.ip_cap <<= 1;
  g.program = alloc_zeroed<Histogram>(2);
  g.ips = alloc_zeroed<uint64_t>(g.ip_cap);
  g.slots = alloc_zeroed<uint32_t>(g.ip_cap);
  g.per_ip = alloc_zeroed<Histogram>(k.max_instructions);
  g.on = g.program && g.ips && g.slots && g.per_ip && g.stacks[0].init(k.max_lines, k.rate_shift) &&
         g.stacks[1].init(k.max_lines, k.rate_shift);
  return g.on;
}

void access(uint64_t ip, uint64_t addr, bool concurrent) noexcept {
  if (!g.on) return;
  const uint64_t line = addr >> g.line_shift;
  if (!g.stacks[0].follows(line) && !g.stacks[1].follows(line >> 1)) return;  // most accesses
  if (concurrent) g.lock.lock();
  double d, w;
  if (g.stacks[0].access(line, &d, &w)) {
    g.program[0].add(d, w);
    if (Histogram* h = histogram_of(ip)) h->add(d, w);
  }
  if (g.stacks[1].access(line >> 1, &d, &w)) g.program[1].add(d, w);
  if (concurrent) g.lock.unlock();
}

size_t record_count() noexcept { return g.on ? 2 + g.nips : 0; }

size_t export_records(profile::ReuseRecord* out, size_t max) noexcept {
  if (!g.on) return 0;
  // finish() may run in a fatal-signal handler that interrupted a thread holding the lock, or
  // while a thread it gave up waiting for holds it: never wait for long, leave the curves out.
  bool locked = false;
  for (int i = 0; i < 100000 && !(locked = g.lock.try_lock()); ++i) __builtin_ia32_pause();
  if (!locked) return 0;
  struct Unlock {
    ~Unlock() { g.lock.unlock(); }
  } unlock;
  size_t n = 0;
  auto put = [&](const Histogram& h, uint32_t scope, uint64_t key, unsigned shift, double rate) {
    if (n == max) return;
    profile::ReuseRecord& r = out[n++];
    std::memset(&r, 0, sizeof r);
    r.key = key;
    r.scope = scope;
    r.line_bytes = 1u << shift;
    r.cold = h.cold;
    r.weighted = h.weighted;
    r.rate = rate;
    std::memcpy(r.buckets, h.buckets, sizeof r.buckets);
  };
  put(g.program[0], profile::kReuseProgram, 0, g.line_shift, g.stacks[0].rate());
  put(g.program[1], profile::kReuseProgram, 0, g.line_shift + 1, g.stacks[1].rate());
  for (uint32_t i = 0; i < g.ip_cap; ++i)
    if (g.ips[i]) put(g.per_ip[g.slots[i]], profile::kReuseInstruction, g.ips[i] - 1, g.line_shift, g.stacks[0].rate());
  return n;
}

}  // namespace whymiss::rt::reuse
