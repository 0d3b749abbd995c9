// What relay.cpp needs from the rest of the runtime, for the relay's own tests.
#include <atomic>
#include <cstddef>

namespace whymiss::rt {

bool recording() noexcept { return true; }
bool set_in_runtime(bool) noexcept { return false; }
void* private_alloc(size_t size) noexcept {
  alignas(16) static unsigned char heap[1 << 20];  // the relay takes 512 KiB (its lane list)
  static std::atomic<size_t> used{0};
  size = (size + 15) & ~size_t(15);
  const size_t at = used.fetch_add(size);
  return at + size <= sizeof heap ? heap + at : nullptr;
}

}  // namespace whymiss::rt
