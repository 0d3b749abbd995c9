// The relay (src/runtime/exact/relay.cpp) on its own, with stubs for the runtime around it; one
// scenario (the relay is a process-wide singleton): stopping, the relay keeps the order between
// threads that markers ask for (relay.h, "Order between threads"). A program's last threads often
// end before a lagging relay has simulated their accesses, which are then simulated while it
// stops: a consumer's reads simulated before the producer's writes it waited for were a wrong
// answer of exact mode's, not a detail of timing. A marker that can never be reached holds its
// lane only until nothing else is left.
#include "runtime/exact/relay.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace whymiss::rt {

namespace {

using namespace std::chrono_literals;

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

relay::Lane g_a, g_b, g_c;  // static: the relay may still read them when a check fails
constexpr uint64_t kGate = 1;  // the address of A's first record: the relay waits there
Event g_in_gate, g_go;

// What the relay simulated, in its order (written by the relay thread only; read after stop()).
struct Done {
  const void* owner;
  uint64_t addr;
};
constexpr size_t kMaxDone = 4096;
Done g_done[kMaxDone];
std::atomic<size_t> g_ndone{0};

void simulate(void* owner, const AccessRecord& r) {
  if (r.addr == kGate) {
    g_in_gate.set();
    g_go.wait_for(60s);
  }
  const size_t n = g_ndone.load(std::memory_order_relaxed);
  if (n < kMaxDone) g_done[n] = Done{owner, r.addr};
  g_ndone.store(n + 1, std::memory_order_release);
}
void retire(void*) {}

AccessRecord rec(uint64_t addr) { return AccessRecord{0x1000, addr, 8, 1}; }

TEST(Relay, StoppingKeepsTheOrderMarkersAskFor) {
  const int tid = int(syscall(SYS_gettid));
  // B first: each pass looks at B before A, so B's records come first unless its marker holds it.
  ASSERT_TRUE(relay::open_lane(&g_b, &g_b, tid));
  ASSERT_TRUE(relay::open_lane(&g_a, &g_a, tid));
  ASSERT_TRUE(relay::open_lane(&g_c, &g_c, tid));
  relay::push(&g_a, rec(kGate));
  ASSERT_TRUE(relay::start(relay::Client{simulate, retire}));
  // The relay is inside A's first record: what follows is all queued when it sees the stop, as
  // with threads that ended before a lagging relay caught up.
  ASSERT_TRUE(g_in_gate.wait_for(60s));
  constexpr uint64_t kA = 100, kB = 50, kC = 10;
  for (uint64_t i = 0; i < kA; ++i) relay::push(&g_a, rec(0x10000 + 64 * i));  // the writes
  relay::depend(&g_b, g_a.id, 1 + kA);  // B acquired what A released after its last write
  for (uint64_t i = 0; i < kB; ++i) relay::push(&g_b, rec(0x20000 + 64 * i));
  relay::depend(&g_c, g_a.id, uint64_t(1) << 39);  // a position A never reaches
  for (uint64_t i = 0; i < kC; ++i) relay::push(&g_c, rec(0x30000 + 64 * i));
  // The stop is seen before anything queued above is simulated: the relay cannot be done while
  // it waits in the gate, so the first stop() gives up after 1 ms with the stop requested.
  EXPECT_FALSE(relay::stop(1));
  g_go.set();
  ASSERT_TRUE(relay::stop(30000));
  EXPECT_EQ(relay::leftover(), 0u);

  // Everything simulated, once: the gate, A's writes, B's and C's records.
  const size_t n = g_ndone.load(std::memory_order_acquire);
  ASSERT_EQ(n, 1 + kA + kB + kC);
  size_t last_a = 0, first_b = n, first_c = n, last_b = 0;
  uint64_t next_b = 0;
  for (size_t i = 0; i < n; ++i) {
    if (g_done[i].owner == &g_a) last_a = i;
    if (g_done[i].owner == &g_b) {
      if (first_b == n) first_b = i;
      last_b = i;
      EXPECT_EQ(g_done[i].addr, 0x20000 + 64 * next_b++) << "B's records in their order";
    }
    if (g_done[i].owner == &g_c && first_c == n) first_c = i;
  }
  EXPECT_EQ(next_b, kB);
  EXPECT_EQ(last_a, kA) << "A's records first (the gate and its writes)";
  EXPECT_GT(first_b, last_a) << "B's first record was simulated before A's write " << last_a
                             << " that it follows";
  // C's position is never reached: it is held only until nothing else can move.
  EXPECT_GT(first_c, last_b);
}

}  // namespace
}  // namespace whymiss::rt
