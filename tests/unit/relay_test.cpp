// The relay (src/runtime/exact/relay.cpp) on its own, with stubs for the runtime around it. The
// relay is a process-wide singleton that cannot be restarted, so the binary holds one scenario:
// a solo owner stuck inside an inline access must not make other threads' pushes wait forever
// (relay.h, "Stall").
#include "runtime/exact/relay.h"

#include <gtest/gtest.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace whymiss::rt {

namespace {

using namespace std::chrono_literals;

// If the relay hangs, so does a join: a thread whose end is awaited with a limit instead. Past
// the limit the whole binary fails, as the hung thread cannot be joined or left behind.
class Watched {
 public:
  template <typename F>
  explicit Watched(F body)
      : thread_([this, body] {
          body();
          std::lock_guard<std::mutex> lock(m_);
          finished_ = true;
          cv_.notify_all();
        }) {}
  void join(const char* what) {
    std::unique_lock<std::mutex> lock(m_);
    if (!cv_.wait_for(lock, 60s, [this] { return finished_; })) {
      std::fprintf(stderr, "relay_test: %s did not finish within 60 s (hung)\n", what);
      std::fflush(stderr);
      std::_Exit(1);
    }
    lock.unlock();
    thread_.join();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool finished_ = false;
  std::thread thread_;  // last: started once the rest exists
};

// A one-shot event between threads.
class Event {
 public:
  void set() {
    std::lock_guard<std::mutex> lock(m_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait_for(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(m_);
    return cv_.wait_for(lock, limit, [this] { return set_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool set_ = false;
};

std::atomic<uint64_t> g_simulated{0};
std::atomic<bool> g_simulated_after_stall{false};
std::atomic<uint64_t> g_retired{0};

void simulate(void*, const AccessRecord&) {
  if (relay::stalled()) g_simulated_after_stall.store(true);
  g_simulated.fetch_add(1);
}
void retire(void*) { g_retired.fetch_add(1); }

AccessRecord rec(uint64_t i) { return AccessRecord{0x1000 + i, i * 64, 8, uint32_t(i % 2)}; }
int tid() { return int(syscall(SYS_gettid)); }

bool solo_possible() {
  const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0;
}

relay::Lane g_a, g_b;  // static: a failed run exits with threads still using them

TEST(Relay, AStuckSoloOwnerStallsTheRelayInsteadOfHangingTheOtherThreads) {
  if (!solo_possible()) GTEST_SKIP() << "no membarrier: the relay never grants solo";
  ASSERT_TRUE(relay::start(relay::Client{simulate, retire}));
  constexpr uint64_t kBurst = 3 * AccessRing::kSlots;  // more than a ring holds

  // A delivers alone until it is granted solo, then acts as an owner interrupted inside its
  // inline access: busy stays set until the test releases it.
  std::atomic<uint64_t> pushed_a{0};
  std::atomic<bool> granted{false}, fence_a{true};
  Event stuck, release;
  Watched a([&] {
    if (!relay::open_lane(&g_a, &g_a, tid())) return stuck.set();
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    uint64_t i = 0;
    for (; std::chrono::steady_clock::now() < give_up; ++i) {
      relay::push(&g_a, rec(i));
      if (relay::solo() != &g_a) continue;
      g_a.busy.store(1, std::memory_order_seq_cst);  // as in the runtime's solo_access
      if (relay::solo() == &g_a) {
        granted = true;
        ++i;
        break;
      }
      g_a.busy.store(0, std::memory_order_release);
    }
    pushed_a = i;
    stuck.set();
    if (!granted || !release.wait_for(120s)) return;
    // The access ends after the relay gave up: back to pushing, none of it simulated.
    g_a.busy.store(0, std::memory_order_release);
    for (uint64_t j = 0; j < kBurst; ++j) relay::push(&g_a, rec(j));
    pushed_a += kBurst;
    fence_a = relay::fence(&g_a);
    relay::close_lane(&g_a);
  });
  ASSERT_TRUE(stuck.wait_for(60s));
  if (!granted) {
    a.join("A");
    FAIL() << "lane A was never granted solo";
  }

  // B needs the simulator: the relay revokes A's grant and waits for A's access to end. B's
  // ring fills up meanwhile; its pushes must return once the relay gives up.
  std::atomic<bool> fence_b{true};
  Watched b([&] {
    if (!relay::open_lane(&g_b, &g_b, tid())) return;
    for (uint64_t i = 0; i < kBurst; ++i) relay::push(&g_b, rec(i));
    fence_b = relay::fence(&g_b);
  });
  b.join("B (pushing while A's access never ends)");

  EXPECT_TRUE(relay::stop(5000));  // already done: returns at once
  EXPECT_TRUE(relay::stalled());
  EXPECT_EQ(relay::solo(), nullptr);
  EXPECT_FALSE(fence_b);
  release.set();
  a.join("A (after its access ended)");
  EXPECT_FALSE(fence_a);

  // Nothing simulated or retired once stalled, and every access accounted for exactly once.
  EXPECT_FALSE(g_simulated_after_stall);
  EXPECT_EQ(g_retired, 0u);
  const uint64_t leftover = relay::leftover();
  EXPECT_GE(leftover, 2 * kBurst);  // all of B's, and all A pushed after its access
  EXPECT_EQ(g_simulated + leftover, pushed_a + kBurst)
      << "simulated " << g_simulated << ", leftover " << leftover << ", pushed by A " << pushed_a;
}

}  // namespace
}  // namespace whymiss::rt
