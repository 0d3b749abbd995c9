#include "runtime/pmu/ring.h"

#include <linux/perf_event.h>

#include <cstddef>
#include <cstring>

namespace whymiss::pmu {

static_assert(offsetof(perf_event_mmap_page, data_head) == kOffDataHead);
static_assert(offsetof(perf_event_mmap_page, data_tail) == kOffDataTail);
static_assert(offsetof(perf_event_mmap_page, data_offset) == kOffDataOffset);
static_assert(offsetof(perf_event_mmap_page, data_size) == kOffDataSize);
static_assert(sizeof(perf_event_header) == 8);

namespace {
uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint64_t* field(uint8_t* base, size_t off) { return reinterpret_cast<uint64_t*>(base + off); }
}  // namespace

bool RingReader::attach(uint8_t* base, size_t map_bytes, size_t page) {
  base_ = data_ = nullptr;
  size_ = 0;
  if (!base || page < sizeof(perf_event_mmap_page) || map_bytes <= page) return false;
  uint64_t off = load_u64(base + kOffDataOffset), size = load_u64(base + kOffDataSize);
  if (off == 0 && size == 0) {  // kernels before 4.1
    off = page;
    size = map_bytes - page;
  }
  if (size < sizeof(perf_event_header) || (size & (size - 1)) != 0) return false;
  if (off < sizeof(perf_event_mmap_page) || off > map_bytes || size > map_bytes - off) return false;
  base_ = base;
  data_ = base + off;
  size_ = size;
  return true;
}

uint64_t RingReader::pending() const {
  if (!base_) return 0;
  uint64_t head = __atomic_load_n(field(base_, kOffDataHead), __ATOMIC_ACQUIRE);
  uint64_t tail = __atomic_load_n(field(base_, kOffDataTail), __ATOMIC_RELAXED);
  return head - tail;
}

void RingReader::copy_out(uint64_t pos, size_t n, uint8_t* dst) const {
  uint64_t at = pos & (size_ - 1);
  size_t first = static_cast<size_t>(size_ - at) < n ? static_cast<size_t>(size_ - at) : n;
  std::memcpy(dst, data_ + at, first);
  if (first < n) std::memcpy(dst + first, data_, n - first);
}

size_t RingReader::drain(RecordFn fn, void* ctx, uint8_t* scratch) {
  if (!base_) return 0;
  // Acquire pairs with the kernel's write barrier before it moves data_head: every byte below
  // head is visible once head is.
  const uint64_t head = __atomic_load_n(field(base_, kOffDataHead), __ATOMIC_ACQUIRE);
  uint64_t tail = __atomic_load_n(field(base_, kOffDataTail), __ATOMIC_RELAXED);
  size_t delivered = 0;
  if (head - tail > size_) {  // the kernel never writes more than one buffer ahead
    ++c_.corrupt;
    c_.bytes += head - tail;
    tail = head;
  }
  while (tail != head) {
    const uint64_t avail = head - tail;
    if (avail < sizeof(perf_event_header)) {
      ++c_.partial;
      break;
    }
    perf_event_header h;
    copy_out(tail, sizeof h, reinterpret_cast<uint8_t*>(&h));
    if (h.size < sizeof h) {  // cannot advance by it: the rest of the stream is unreadable
      ++c_.corrupt;
      c_.bytes += avail;
      tail = head;
      break;
    }
    if (h.size > avail) {
      ++c_.partial;
      break;
    }
    const uint64_t at = tail & (size_ - 1);
    const uint8_t* rec = data_ + at;
    if (at + h.size > size_) {
      copy_out(tail, h.size, scratch);
      rec = scratch;
      ++c_.wrapped;
    }
    fn(ctx, rec, h.size);
    ++c_.records;
    ++delivered;
    c_.bytes += h.size;
    tail += h.size;
  }
  // Release: our reads of the records complete before the kernel may overwrite them.
  __atomic_store_n(field(base_, kOffDataTail), tail, __ATOMIC_RELEASE);
  return delivered;
}

}  // namespace whymiss::pmu
