// Synthetic perf rings for the pmu tests: records laid out byte for byte as the kernel writes
// them (linux/perf_event.h), in a buffer with a perf_event_mmap_page control page, including
// what the kernel does when the ring is full (drop the record, count it, and write a
// PERF_RECORD_LOST before the next record that fits).
#pragma once
#include <linux/perf_event.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace whymiss::pmu::synth {

inline constexpr size_t kPage = 4096;

// Appends little-endian integers to a byte vector.
struct Bytes {
  std::vector<uint8_t> b;
  void u64(uint64_t v) { put(&v, 8); }
  void u32(uint32_t v) { put(&v, 4); }
  void u16(uint16_t v) { put(&v, 2); }
  void put(const void* p, size_t n) {
    auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  }
};

// Field values of one PERF_RECORD_SAMPLE; written for the bits of the sample_type given.
struct Sample {
  uint64_t id = 0, ip = 0, time = 0, addr = 0, stream_id = 0, period = 0, weight = 0;
  uint64_t data_src = 0, transaction = 0, phys_addr = 0, cgroup = 0, data_page = 0, code_page = 0;
  uint32_t pid = 0, tid = 0, cpu = 0;
  std::vector<uint64_t> callchain;
  std::vector<uint8_t> raw;  // payload before the kernel's padding
};

inline std::vector<uint8_t> record(uint32_t type, uint16_t misc, const std::vector<uint8_t>& body) {
  Bytes r;
  r.u32(type);
  r.u16(misc);
  r.u16(static_cast<uint16_t>(8 + body.size()));
  r.put(body.data(), body.size());
  return r.b;
}

inline std::vector<uint8_t> sample_record(uint64_t st, const Sample& s) {
  Bytes r;
  if (st & PERF_SAMPLE_IDENTIFIER) r.u64(s.id);
  if (st & PERF_SAMPLE_IP) r.u64(s.ip);
  if (st & PERF_SAMPLE_TID) { r.u32(s.pid); r.u32(s.tid); }
  if (st & PERF_SAMPLE_TIME) r.u64(s.time);
  if (st & PERF_SAMPLE_ADDR) r.u64(s.addr);
  if (st & PERF_SAMPLE_ID) r.u64(s.id);
  if (st & PERF_SAMPLE_STREAM_ID) r.u64(s.stream_id);
  if (st & PERF_SAMPLE_CPU) { r.u32(s.cpu); r.u32(0); }
  if (st & PERF_SAMPLE_PERIOD) r.u64(s.period);
  if (st & PERF_SAMPLE_CALLCHAIN) {
    r.u64(s.callchain.size());
    for (uint64_t ip : s.callchain) r.u64(ip);
  }
  if (st & PERF_SAMPLE_RAW) {
    // The kernel pads so that the u32 size plus the payload is a multiple of 8, and the size
    // field counts the padding.
    const size_t padded = ((4 + s.raw.size() + 7) & ~size_t(7)) - 4;
    r.u32(static_cast<uint32_t>(padded));
    r.put(s.raw.data(), s.raw.size());
    for (size_t i = s.raw.size(); i < padded; ++i) r.b.push_back(0);
  }
  if (st & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) r.u64(s.weight);
  if (st & PERF_SAMPLE_DATA_SRC) r.u64(s.data_src);
  if (st & PERF_SAMPLE_TRANSACTION) r.u64(s.transaction);
  if (st & PERF_SAMPLE_PHYS_ADDR) r.u64(s.phys_addr);
  if (st & PERF_SAMPLE_CGROUP) r.u64(s.cgroup);
  if (st & PERF_SAMPLE_DATA_PAGE_SIZE) r.u64(s.data_page);
  if (st & PERF_SAMPLE_CODE_PAGE_SIZE) r.u64(s.code_page);
  return record(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, r.b);
}

// The sample_id trailer of non-sample records (attr.sample_id_all).
inline void sample_id(Bytes& r, uint64_t st, uint32_t pid, uint32_t tid, uint64_t time, uint64_t id) {
  if (st & PERF_SAMPLE_TID) { r.u32(pid); r.u32(tid); }
  if (st & PERF_SAMPLE_TIME) r.u64(time);
  if (st & PERF_SAMPLE_ID) r.u64(id);
  if (st & PERF_SAMPLE_STREAM_ID) r.u64(id);
  if (st & PERF_SAMPLE_CPU) { r.u32(0); r.u32(0); }
  if (st & PERF_SAMPLE_IDENTIFIER) r.u64(id);
}

inline std::vector<uint8_t> lost_record(uint64_t st, uint64_t id, uint64_t lost) {
  Bytes r;
  r.u64(id);
  r.u64(lost);
  sample_id(r, st, 1, 1, 0, id);
  return record(PERF_RECORD_LOST, 0, r.b);
}

inline std::vector<uint8_t> lost_samples_record(uint64_t st, uint64_t lost) {
  Bytes r;
  r.u64(lost);
  sample_id(r, st, 1, 1, 0, 0);
  return record(PERF_RECORD_LOST_SAMPLES, 0, r.b);
}

inline std::vector<uint8_t> throttle_record(uint64_t st, bool throttle, uint64_t time, uint64_t id) {
  Bytes r;
  r.u64(time);
  r.u64(id);
  r.u64(id);  // stream_id
  sample_id(r, st, 1, 1, time, id);
  return record(throttle ? PERF_RECORD_THROTTLE : PERF_RECORD_UNTHROTTLE, 0, r.b);
}

// IBS op raw payload: caps, then IBS_OP_CTL .. IBS_DC_PHYSADDR.
struct IbsRegs {
  uint32_t caps = (1u << 0) | (1u << 2) | (1u << 7);  // avail, op sampling, RIP-invalid check
  uint64_t ctl = 0, rip = 0, data = 0, data2 = 0, data3 = 0, linaddr = 0, physaddr = 0;
};
inline std::vector<uint8_t> ibs_raw(const IbsRegs& r) {
  Bytes b;
  b.u32(r.caps);
  for (uint64_t v : {r.ctl, r.rip, r.data, r.data2, r.data3, r.linaddr, r.physaddr}) b.u64(v);
  return b.b;
}
// IBS_OP_DATA3 for a load or store.
inline uint64_t ibs_data3(bool load, bool store, bool dc_miss, bool l2_miss, bool lin_valid,
                          uint16_t miss_lat = 0) {
  return uint64_t(load) | uint64_t(store) << 1 | uint64_t(dc_miss) << 7 | uint64_t(lin_valid) << 17 |
         uint64_t(l2_miss) << 20 | uint64_t(miss_lat) << 32;
}
// IBS_OP_DATA2: 5-bit data source split into bits 0-2 and 6-7, RmtNode bit 4, CacheHitSt bit 5.
inline uint64_t ibs_data2(uint32_t src, bool remote, bool hit_st) {
  return (src & 7) | uint64_t(remote) << 4 | uint64_t(hit_st) << 5 | uint64_t((src >> 3) & 3) << 6;
}

// perf_mem_data_src from its fields.
inline uint64_t data_src(uint64_t op, uint64_t lvl, uint64_t snoop, uint64_t lvlnum = 0,
                         bool remote = false) {
  return op << PERF_MEM_OP_SHIFT | lvl << PERF_MEM_LVL_SHIFT | snoop << PERF_MEM_SNOOP_SHIFT |
         lvlnum << PERF_MEM_LVLNUM_SHIFT | uint64_t(remote) << PERF_MEM_REMOTE_SHIFT;
}

// A ring as mmap'ed: control page, then `data_pages` pages of data.
class Ring {
 public:
  explicit Ring(size_t data_pages, bool legacy_offsets = false)
      : buf_(kPage * (1 + data_pages)), size_(kPage * data_pages) {
    perf_event_mmap_page pg;
    std::memset(&pg, 0, sizeof pg);
    if (!legacy_offsets) {
      pg.data_offset = kPage;
      pg.data_size = size_;
    }
    std::memcpy(buf_.data(), &pg, sizeof pg);
  }
  uint8_t* base() { return buf_.data(); }
  size_t bytes() const { return buf_.size(); }
  size_t data_size() const { return size_; }
  uint64_t head() const { return page()->data_head; }
  uint64_t tail() const { return page()->data_tail; }
  // Moves both to `pos` (an empty ring that has been used before, e.g. to test wrapping).
  void reset_to(uint64_t pos) { page()->data_head = page()->data_tail = pos; }
  void set_head(uint64_t h) { __atomic_store_n(&page()->data_head, h, __ATOMIC_RELEASE); }

  // Copies bytes at head (wrapping) without publishing them.
  void put_at(uint64_t pos, const std::vector<uint8_t>& rec) {
    for (size_t i = 0; i < rec.size(); ++i) buf_[kPage + ((pos + i) & (size_ - 1))] = rec[i];
  }
  // Writes a record like the kernel: if there is no room it is dropped and counted; before the
  // next record that fits, a PERF_RECORD_LOST for the dropped ones goes first.
  bool write(const std::vector<uint8_t>& rec, uint64_t st = 0, uint64_t id = 0) {
    if (lost_) {
      auto l = lost_record(st, id, lost_);
      if (!fits(l.size() + rec.size())) { ++lost_; return false; }
      append(l);
      lost_ = 0;
    }
    if (!fits(rec.size())) { ++lost_; return false; }
    append(rec);
    return true;
  }
  uint64_t pending_lost() const { return lost_; }

 private:
  perf_event_mmap_page* page() { return reinterpret_cast<perf_event_mmap_page*>(buf_.data()); }
  const perf_event_mmap_page* page() const {
    return reinterpret_cast<const perf_event_mmap_page*>(buf_.data());
  }
  bool fits(size_t n) const {
    uint64_t tail = __atomic_load_n(&page()->data_tail, __ATOMIC_ACQUIRE);
    return head() + n - tail <= size_;
  }
  void append(const std::vector<uint8_t>& rec) {
    put_at(head(), rec);
    set_head(head() + rec.size());
  }
  std::vector<uint8_t> buf_;
  size_t size_;
  uint64_t lost_ = 0;
};

}  // namespace whymiss::pmu::synth
