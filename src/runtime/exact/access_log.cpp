#include "runtime/exact/access_log.h"

#include "runtime/common/heap_internal.h"

namespace whymiss::rt::alog {

constinit Log g_log;

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
