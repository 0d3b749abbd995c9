#include "runtime/exact/access_log.h"

#include "runtime/common/heap_internal.h"

namespace whymiss::rt::alog {

constinit Log g_log;

bool start(uint64_t entries) noexcept {
  if (entries == 0) return false;
  auto* p = static_cast<uint64_t*>(reserve_zeroed(entries * sizeof(uint64_t)));
  if (p == nullptr) return false;
  g_log.entries = p;
  g_log.capacity = entries;
  return true;
}

}  // namespace whymiss::rt::alog
