// The relay (src/runtime/exact/relay.cpp) told to abandon its work, as finish() does when it
// interrupted the calling thread's own inline access: it must stop without simulating more, and
// leftover() must then count every access it never simulated. One scenario per binary: the relay
// is a process-wide singleton.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/exact/relay.h"

namespace whymiss::rt {
namespace {

std::mutex g_mu;
std::condition_variable g_cv;
bool g_release = false;           // the first simulate() waits for this
std::atomic<uint64_t> g_simulated{0};

void simulate(void*, const AccessRecord&) {
  if (g_simulated.fetch_add(1) == 0) {
    std::unique_lock<std::mutex> lock(g_mu);
    g_cv.wait(lock, [] { return g_release; });
  }
}
void retire(void*) {}

TEST(RelayAbandon, StopsAndCountsWhatItNeverSimulated) {
  ASSERT_TRUE(relay::start(relay::Client{simulate, retire}));
  relay::Lane lane;
  ASSERT_TRUE(relay::open_lane(&lane, nullptr, 0));
  constexpr uint64_t kPushed = 1000;  // fits the ring: no push waits
  for (uint64_t i = 0; i < kPushed; ++i) relay::push(&lane, AccessRecord{i + 1, i * 64, 8, 0});
  // The relay is now inside its first simulate(), which waits for the release.
  while (g_simulated.load() == 0) std::this_thread::yield();
  relay::abandon();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_release = true;
  }
  g_cv.notify_all();
  ASSERT_TRUE(relay::stop(60000));
  const uint64_t simulated = g_simulated.load();
  EXPECT_LT(simulated, kPushed);  // it stopped instead of draining the ring
  EXPECT_EQ(simulated + relay::leftover(), kPushed);
  EXPECT_FALSE(relay::stalled());
}

}  // namespace
}  // namespace whymiss::rt
