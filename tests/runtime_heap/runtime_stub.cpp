// Test stand-in for the runtime core: thread indices from a counter, in_runtime() from a
// thread-local flag the tests toggle, recording() from a global switch (on by default, so even
// GoogleTest's own allocations are recorded, as in a real run).
#include "runtime_stub.h"

#include <atomic>
#include <cstdint>

#include "runtime/common/heap.h"
#include "runtime/common/runtime_state.h"

namespace whymiss::rt {
namespace {

__thread bool t_in_runtime __attribute__((tls_model("initial-exec"))) = false;
__thread uint32_t t_index_plus_one __attribute__((tls_model("initial-exec"))) = 0;
std::atomic<uint32_t> g_next_index{0};
std::atomic<bool> g_recording{true};

}  // namespace

uint32_t current_thread_index() noexcept {
  if (t_index_plus_one == 0) {
    t_index_plus_one = g_next_index.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  return t_index_plus_one - 1;
}

void heap_detach_fence() noexcept {}

bool in_runtime() noexcept {
  return t_in_runtime;
}

bool recording() noexcept {
  return g_recording.load(std::memory_order_relaxed);
}

void test_set_in_runtime(bool on) noexcept {
  t_in_runtime = on;
}

void test_set_recording(bool on) noexcept {
  g_recording.store(on, std::memory_order_relaxed);
}

// The runtime's own threads (exact mode's reuse worker) mark themselves with it.
bool set_in_runtime(bool inside) noexcept {
  const bool was = t_in_runtime;
  t_in_runtime = inside;
  return was;
}

}  // namespace whymiss::rt
