#include "runtime/exact/access_log.h"

#include "runtime/common/heap_internal.h"

namespace whymiss::rt::alog {

constinit Log g_log;
constinit thread_local Block t_block __attribute__((tls_model("initial-exec")));

bool reserve_block() noexcept {
  Log& l = g_log;
  Block& b = t_block;
  // The last block filled up (not sealed): the next one twice as large, up to kBlock.
  uint64_t size = b.size ? b.size : kBlock;
  if (b.end != 0 && b.end - b.start == size && size < kBlock) size *= 2;
  const uint64_t i = l.next.fetch_add(size, std::memory_order_relaxed);
  if (i >= l.capacity) {
    b = Block{};
    return false;
  }
  if (!l.blocks.load(std::memory_order_relaxed)) l.blocks.store(true, std::memory_order_relaxed);
  b.start = b.next = i;
  b.end = i + size < l.capacity ? i + size : l.capacity;
  b.size = size;
  return true;
}

uint64_t kept() noexcept {
  Log& l = g_log;
  uint64_t n = l.next.load(std::memory_order_acquire);
  if (n > l.capacity) n = l.capacity;
  if (l.blocks.exchange(false, std::memory_order_acq_rel)) {
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; ++i)
      if (l.entries[i] != 0) l.entries[k++] = l.entries[i];
    n = k;
    l.next.store(n, std::memory_order_release);  // (so that a second call keeps the same count)
  }
  return n;
}

bool start(uint64_t entries) noexcept {
  if (entries == 0) return false;
  // Bounded whatever the environment asks (and no overflow in the size below): 2^26 entries,
  // 512 MiB of address space, touched only as the log fills.
  constexpr uint64_t kMaxEntries = uint64_t(1) << 26;
  if (entries > kMaxEntries) entries = kMaxEntries;
  auto* p = static_cast<uint64_t*>(reserve_zeroed(entries * sizeof(uint64_t)));
  if (p == nullptr) return false;
  g_log.entries = p;
  g_log.capacity = entries;
  return true;
}

}  // namespace whymiss::rt::alog
