#include "runtime/pmu/sample.h"

#include <linux/perf_event.h>

#include <cstring>

#include "runtime/pmu/levels.h"

namespace whymiss::pmu {
namespace {

constexpr uint64_t kSupported =
    PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
    PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU |
    PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | PERF_SAMPLE_WEIGHT |
    PERF_SAMPLE_WEIGHT_STRUCT | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_TRANSACTION |
    PERF_SAMPLE_PHYS_ADDR | PERF_SAMPLE_CGROUP | PERF_SAMPLE_DATA_PAGE_SIZE |
    PERF_SAMPLE_CODE_PAGE_SIZE;

constexpr uint64_t kKernelHalf = 0x0000800000000000ull;  // x86-64 canonical user space ends here

// Sequential bounds-checked reader over one record.
struct Cursor {
  const uint8_t* p;
  size_t left;
  bool ok = true;
  uint64_t u64() {
    uint64_t v = 0;
    if (left < 8) { ok = false; return 0; }
    std::memcpy(&v, p, 8);
    p += 8;
    left -= 8;
    return v;
  }
  void pair(uint32_t* a, uint32_t* b) {
    uint64_t v = u64();
    *a = static_cast<uint32_t>(v);
    *b = static_cast<uint32_t>(v >> 32);
  }
  void skip(uint64_t n) {
    if (n > left) { ok = false; return; }
    p += n;
    left -= n;
  }
};

}  // namespace

uint64_t supported_sample_type() { return kSupported; }

bool parse_sample(uint64_t st, const uint8_t* rec, size_t size, RawSample* out) {
  *out = RawSample{};
  if (size < sizeof(perf_event_header) || (st & ~kSupported)) return false;
  Cursor c{rec + sizeof(perf_event_header), size - sizeof(perf_event_header)};
  uint32_t res;
  if (st & PERF_SAMPLE_IDENTIFIER) out->id = c.u64();
  if (st & PERF_SAMPLE_IP) out->ip = c.u64();
  if (st & PERF_SAMPLE_TID) c.pair(&out->pid, &out->tid);
  if (st & PERF_SAMPLE_TIME) out->time = c.u64();
  if (st & PERF_SAMPLE_ADDR) out->addr = c.u64();
  if (st & PERF_SAMPLE_ID) out->id = c.u64();
  if (st & PERF_SAMPLE_STREAM_ID) c.u64();
  if (st & PERF_SAMPLE_CPU) c.pair(&out->cpu, &res);
  if (st & PERF_SAMPLE_PERIOD) out->period = c.u64();
  if (st & PERF_SAMPLE_CALLCHAIN) {
    uint64_t nr = c.u64();
    if (nr > c.left / 8) return false;
    c.skip(nr * 8);
  }
  if (st & PERF_SAMPLE_RAW) {
    if (c.left < 4) return false;
    uint32_t n;
    std::memcpy(&n, c.p, 4);
    // The kernel pads the payload so that the u32 size and the data end 8-byte aligned.
    if (n > c.left - 4 || (n + 4u) % 8 != 0) return false;
    out->raw = c.p + 4;
    out->raw_size = n;
    c.skip(4 + uint64_t(n));
  }
  if (st & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) out->weight = c.u64();
  if (st & PERF_SAMPLE_DATA_SRC) out->data_src = c.u64();
  if (st & PERF_SAMPLE_TRANSACTION) c.u64();
  if (st & PERF_SAMPLE_PHYS_ADDR) out->phys_addr = c.u64();
  if (st & PERF_SAMPLE_CGROUP) c.u64();
  if (st & PERF_SAMPLE_DATA_PAGE_SIZE) c.u64();
  if (st & PERF_SAMPLE_CODE_PAGE_SIZE) c.u64();
  return c.ok;
}

Result<Decoder> Decoder::make(const DecoderConfig& cfg, SampleSink sink) {
  using profile::SampleSource;
  const uint64_t st = cfg.sample_type;
  if (cfg.source != SampleSource::Pebs && cfg.source != SampleSource::Ibs)
    return make_error("The pmu decoder handles PEBS and IBS samples only.");
  if (st & ~kSupported)
    return make_error("The sample format asks for fields the pmu decoder cannot parse.");
  if (!(st & PERF_SAMPLE_TID)) return make_error("The sample format lacks the thread id.");
  if (cfg.source == SampleSource::Pebs &&
      (st & (PERF_SAMPLE_IP | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC)) !=
          (PERF_SAMPLE_IP | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC))
    return make_error("PEBS samples need the instruction, data address and data source fields.");
  if (cfg.source == SampleSource::Ibs && !(st & PERF_SAMPLE_RAW))
    return make_error("IBS samples need the raw register data.");
  if (cfg.levels == 0 || cfg.levels > profile::kLevels)
    return make_error("The cache geometry for pmu levels must have 1 to 4 levels.");
  if (cfg.store_id_count > 4) return make_error("At most four store event ids are supported.");
  if (!sink.fn) return make_error("The pmu decoder needs a sample sink.");
  Decoder d;
  d.cfg_ = cfg;
  d.sink_ = sink;
  return d;
}

void Decoder::record_fn(void* self, const uint8_t* rec, size_t size) {
  static_cast<Decoder*>(self)->on_record(rec, size);
}

void Decoder::on_record(const uint8_t* rec, size_t size) {
  perf_event_header h;
  if (size < sizeof h) { ++c_.malformed; return; }
  std::memcpy(&h, rec, sizeof h);
  const uint8_t* body = rec + sizeof h;
  const size_t n = size - sizeof h;
  auto u64_at = [&](size_t i) {
    uint64_t v;
    std::memcpy(&v, body + 8 * i, 8);
    return v;
  };
  switch (h.type) {
    case PERF_RECORD_SAMPLE:
      on_sample(rec, size);
      return;
    case PERF_RECORD_LOST:  // u64 id, u64 lost
      if (n < 16) { ++c_.malformed; return; }
      c_.lost += u64_at(1);
      return;
    case PERF_RECORD_LOST_SAMPLES:  // u64 lost
      if (n < 8) { ++c_.malformed; return; }
      c_.lost_samples += u64_at(0);
      return;
    case PERF_RECORD_THROTTLE:
    case PERF_RECORD_UNTHROTTLE: {  // u64 time, id, stream_id
      if (n < 24) { ++c_.malformed; return; }
      const uint64_t t = u64_at(0);
      if (h.type == PERF_RECORD_THROTTLE) {
        ++c_.throttles;
        if (!throttled_) throttle_start_ = t;
        throttled_ = true;
      } else {
        ++c_.unthrottles;
        if (throttled_ && t >= throttle_start_) c_.throttled_ns += t - throttle_start_;
        throttled_ = false;
      }
      return;
    }
    default:
      ++c_.other;
      return;
  }
}

void Decoder::on_sample(const uint8_t* rec, size_t size) {
  ++c_.samples;
  RawSample s;
  if (!parse_sample(cfg_.sample_type, rec, size, &s)) { ++c_.malformed; return; }
  c_.period_sum += s.period;
  profile::SampleRecord r{};
  r.time_ns = s.time;
  Level lv;
  if (cfg_.source == profile::SampleSource::Ibs) {
    IbsOp op;
    if (!decode_ibs_op(s.raw, s.raw_size, cfg_.family, cfg_.model, cfg_.levels, &op)) {
      ++c_.malformed;
      return;
    }
    if (op.level.flags == 0) { ++c_.not_memory; return; }
    if (!op.ip_valid) { ++c_.no_ip; return; }
    if (!op.addr_valid) { ++c_.no_address; return; }
    r.ip = op.ip;
    r.addr = op.addr;
    r.weight = op.latency;
    lv = op.level;
  } else {
    lv = level_from_data_src(s.data_src, cfg_.levels);
    if (lv.flags == 0) {
      lv.flags = profile::kAccessRead;
      for (uint32_t i = 0; i < cfg_.store_id_count; ++i)
        if (cfg_.store_ids[i] == s.id) lv.flags = profile::kAccessWrite;
    }
    if (s.addr == 0) { ++c_.no_address; return; }
    r.ip = s.ip;
    r.addr = s.addr;
    r.weight = static_cast<uint32_t>(s.weight);  // latency: WEIGHT, or WEIGHT_STRUCT's var1_dw
  }
  if (r.ip >= kKernelHalf) { ++c_.kernel; return; }
  r.level = lv.level;
  r.flags = static_cast<uint8_t>(lv.flags | (lv.hitm ? profile::kSampleHitm : 0) |
                                 (lv.remote ? profile::kSampleRemote : 0));
  ++c_.kept;
  sink_.fn(sink_.ctx, s.tid, r);
}

}  // namespace whymiss::pmu
