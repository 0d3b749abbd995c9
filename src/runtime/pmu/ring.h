// Reader of a perf_event mmap ring buffer, over plain bytes, so the same code drains a live
// mapping and a synthetic buffer written by a test.
//
// Layout (linux/perf_event.h): the first page is struct perf_event_mmap_page; the kernel
// advances data_head after a record is complete, the reader consumes [data_tail, data_head)
// and then publishes data_tail, which frees the space. Records are perf_event_header{type,
// misc, size} followed by size-8 bytes, 8-byte aligned, and may wrap around the end of the
// data area. data_offset/data_size are 0 on kernels before 4.1: the data area then starts one
// page into the mapping and fills the rest.
//
// Contract: drain() allocates nothing, takes no locks and makes no system calls, so it may run
// on any thread (one drainer per ring at a time). A corrupt stream (a header with size < 8, or
// head running more than a buffer ahead of tail) is never trusted: the reader skips to head,
// counts it and goes on. A record whose bytes are not all there yet is left for the next drain.
#pragma once
#include <cstddef>
#include <cstdint>

namespace whymiss::pmu {

inline constexpr size_t kMaxRecordBytes = 65535;  // perf_event_header::size is 16 bits

// Offsets of the fields the reader uses, from the kernel's struct (checked in ring.cpp).
inline constexpr size_t kOffDataHead = 1024, kOffDataTail = 1032, kOffDataOffset = 1040,
                        kOffDataSize = 1048;

struct RingCounters {
  uint64_t records = 0;  // complete records handed to the callback
  uint64_t bytes = 0;    // bytes consumed (including skipped corrupt bytes)
  uint64_t wrapped = 0;  // records that wrapped around the end and were copied
  uint64_t corrupt = 0;  // times the stream was found corrupt and skipped to head
  uint64_t partial = 0;  // drains that stopped at a record not yet complete
};

// Called for each complete record: `rec` points at its perf_event_header, `size` is its size.
// The bytes are valid only during the call.
using RecordFn = void (*)(void* ctx, const uint8_t* rec, size_t size);

class RingReader {
 public:
  // `base` is the start of the mapping (the control page), `map_bytes` its length, `page` the
  // page size. Returns false (and stays unusable) when the geometry does not hold: data area
  // outside the mapping, size not a power of two, or smaller than one record header.
  bool attach(uint8_t* base, size_t map_bytes, size_t page);

  // Hands every complete record between data_tail and data_head to `fn`, then publishes the
  // new data_tail. `scratch` must hold kMaxRecordBytes bytes (records that wrap are copied
  // there). Returns the number of records delivered.
  size_t drain(RecordFn fn, void* ctx, uint8_t* scratch);

  // Bytes written by the kernel and not yet consumed (0 when the reader is unusable).
  uint64_t pending() const;

  const RingCounters& counters() const { return c_; }
  bool attached() const { return base_ != nullptr; }

 private:
  void copy_out(uint64_t pos, size_t n, uint8_t* dst) const;
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;  // data area bytes, a power of two
  RingCounters c_;
};

}  // namespace whymiss::pmu
