// A spinlock for the runtime: never allocates, yields when contended for long.
#pragma once
#include <sched.h>

#include <atomic>

namespace whymiss::rt {

class SpinLock {
 public:
  void lock() noexcept {
    for (unsigned spins = 0; flag_.exchange(true, std::memory_order_acquire);) {
      while (flag_.load(std::memory_order_relaxed)) {
        if (++spins < 128) __builtin_ia32_pause(); else sched_yield();
      }
    }
  }
  bool try_lock() noexcept { return !flag_.exchange(true, std::memory_order_acquire); }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }
  void reset() noexcept { flag_.store(false, std::memory_order_relaxed); }  // after fork

 private:
  std::atomic<bool> flag_{false};
};

class LockGuard {
 public:
  explicit LockGuard(SpinLock& l) noexcept : l_(l) { l_.lock(); }
  ~LockGuard() { l_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  SpinLock& l_;
};

}  // namespace whymiss::rt
