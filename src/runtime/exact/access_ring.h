// A single-producer single-consumer ring of memory accesses: how a thread of a multi-threaded
// program hands its accesses to the exact runtime's simulator thread (see relay.cpp).
//
// Contract: exactly one producer thread calls push/produced; exactly one consumer thread calls
// pop/publish/pending. Both may call consumed(). The producer's push never blocks: it says false
// when the ring is full, and the caller decides how to wait. Lives in memory the caller maps
// (a few tens of KiB); no allocation, no system call, async-signal-safe on the producer side as
// long as a signal handler on the producer thread never pushes (the ABI layer guarantees that).
#pragma once
#include <atomic>
#include <cstdint>

namespace whymiss::rt {

struct AccessRecord {
  uint64_t ip;    // return address of the instrumented call (0 = unknown)
  uint64_t addr;
  uint32_t size;  // 1..line size (ranges are split before they get here); 0: a marker (relay.h)
  uint32_t write;
};
static_assert(sizeof(AccessRecord) == 24);

class AccessRing {
 public:
  static constexpr uint32_t kSlots = 2048;  // power of two
  static constexpr uint32_t kPublishEvery = 32;  // consumer: make room visible this often
  static constexpr uint32_t kPrefetchAhead = 24;  // records (9 host lines)
  static constexpr uint32_t kWriteAhead = 32;     // producer: records (12 host lines)

  // Producer.
  bool push(const AccessRecord& r) noexcept {
    const uint64_t h = head_.load(std::memory_order_relaxed);
    if (h - tail_seen_ >= kSlots) {
      tail_seen_ = tail_.load(std::memory_order_acquire);
      if (h - tail_seen_ >= kSlots) return false;
    }
    slots_[h & (kSlots - 1)] = r;
    head_.store(h + 1, std::memory_order_release);
    // The consumer read the slots ahead one lap ago, so writing them takes their lines back from
    // its core: ask for them a few lines early (for writing), once the consumer is known to be
    // done with them, so that the stores do not wait for it.
    const uint64_t ahead = h + kWriteAhead;
    if (ahead - tail_seen_ < kSlots) __asm__ volatile("prefetchw %0" : : "m"(slots_[ahead & (kSlots - 1)]));
    return true;
  }
  uint64_t produced() const noexcept { return head_.load(std::memory_order_acquire); }
  // Whether the consumer had finished with everything pushed (see done()/publish()) when the
  // producer last looked, which costs nothing: what the consumer wrote while working on those
  // records is then visible here. look() looks again, reading the consumer's line.
  bool drained() const noexcept { return tail_seen_ == head_.load(std::memory_order_relaxed); }
  bool look() noexcept {
    tail_seen_ = tail_.load(std::memory_order_acquire);
    return drained();
  }

  // Consumer. pop() takes the oldest record, if any; done() says the consumer is finished with
  // it. Room (and "consumed") becomes visible to the producer every kPublishEvery done()s and at
  // publish(), so consumed() never counts a record still being worked on.
  bool pop(AccessRecord* out) noexcept {
    if (next_ == head_seen_) {
      head_seen_ = head_.load(std::memory_order_acquire);
      if (next_ == head_seen_) return false;
    }
    *out = slots_[next_ & (kSlots - 1)];
    // The slots were written on the producer's core: start moving the ones a few lines ahead.
    __builtin_prefetch(&slots_[(next_ + kPrefetchAhead) & (kSlots - 1)]);
    ++next_;
    return true;
  }
  // Returns whether it published. Publishing is a full barrier (seq_cst store), so that a
  // producer that announced it sleeps before looking at the room (see relay.cpp) is seen.
  bool done() noexcept {
    if ((next_ & (kPublishEvery - 1)) != 0) return false;
    tail_.store(next_, std::memory_order_seq_cst);
    return true;
  }
  void publish() noexcept {
    if (tail_.load(std::memory_order_relaxed) != next_) tail_.store(next_, std::memory_order_seq_cst);
  }
  // Records pushed and not yet popped, as the consumer last saw the producer.
  bool pending() noexcept {
    if (next_ != head_seen_) return true;
    head_seen_ = head_.load(std::memory_order_acquire);
    return next_ != head_seen_;
  }

  // Consumer: records popped so far (exact, unlike consumed()).
  uint64_t popped() const noexcept { return next_; }

  // Either side: records popped and published so far.
  uint64_t consumed() const noexcept { return tail_.load(std::memory_order_acquire); }

 private:
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the producer
  uint64_t tail_seen_ = 0;                     // producer's last look at tail_
  alignas(64) std::atomic<uint64_t> tail_{0};  // written by the consumer
  uint64_t next_ = 0, head_seen_ = 0;          // consumer's position and last look at head_
  alignas(64) AccessRecord slots_[kSlots];
};

}  // namespace whymiss::rt
