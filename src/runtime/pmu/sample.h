// PERF_RECORD_* parsing and the turn of a PEBS or IBS sample into a profile::SampleRecord.
//
// The parser reads the fields of PERF_RECORD_SAMPLE in the kernel's fixed order for the
// sample_type the event was opened with (linux/perf_event.h), bounds-checked against the
// record's size: a record that does not match its format is counted as malformed and skipped,
// never read past. Besides samples it accounts PERF_RECORD_LOST (events dropped because the
// ring was full), PERF_RECORD_LOST_SAMPLES, and THROTTLE/UNTHROTTLE (the kernel stopped
// sampling for a while because interrupts cost too much): the estimator needs all of them to
// scale sample counts.
//
// Contract: Decoder::on_record allocates nothing and makes no system calls.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/profile.h"
#include "model/result.h"

namespace whymiss::pmu {

// The PERF_SAMPLE_* bits the parser understands (others change the layout in ways we do not
// need: READ, BRANCH_STACK, REGS_*, STACK_USER, AUX).
uint64_t supported_sample_type();

// The fields of one PERF_RECORD_SAMPLE; those not in the sample_type are 0.
struct RawSample {
  uint64_t id = 0, ip = 0, time = 0, addr = 0, period = 0, weight = 0, data_src = 0;
  uint64_t phys_addr = 0;
  uint32_t pid = 0, tid = 0, cpu = 0;
  const uint8_t* raw = nullptr;  // PERF_SAMPLE_RAW payload (points into the record)
  uint32_t raw_size = 0;
};

// Parses a PERF_RECORD_SAMPLE (`rec` starts at its header). False when the record is shorter
// than its fields, or a variable-size field (callchain, raw) does not fit or breaks alignment.
bool parse_sample(uint64_t sample_type, const uint8_t* rec, size_t size, RawSample* out);

struct DecoderConfig {
  profile::SampleSource source = profile::SampleSource::Pebs;  // Pebs or Ibs
  uint64_t sample_type = 0;
  uint32_t levels = 3;            // cache levels of the profile's geometry
  uint32_t family = 0, model = 0; // CPU (cpuid), for IBS data-source encodings and errata
  // PEBS: samples whose data_src does not name the operation are loads, unless they come from
  // one of these event ids (PERF_SAMPLE_IDENTIFIER), which sample stores.
  uint64_t store_ids[4] = {};
  uint32_t store_id_count = 0;
};

struct DecoderCounters {
  uint64_t samples = 0;      // PERF_RECORD_SAMPLE records seen
  uint64_t kept = 0;         // delivered as SampleRecords
  uint64_t malformed = 0;    // records that did not match their format
  uint64_t no_address = 0;   // no valid data address (IBS: DcLinAddrValid clear; PEBS: 0)
  uint64_t no_ip = 0;        // IBS: RIP invalid
  uint64_t kernel = 0;       // ip in the kernel half of the address space
  uint64_t not_memory = 0;   // IBS: the sampled op was neither a load nor a store
  uint64_t period_sum = 0;   // events the seen samples stand for (PERF_SAMPLE_PERIOD)
  uint64_t lost = 0;         // records the kernel could not write (PERF_RECORD_LOST)
  uint64_t lost_samples = 0; // PERF_RECORD_LOST_SAMPLES
  uint64_t throttles = 0, unthrottles = 0;
  uint64_t throttled_ns = 0; // time between THROTTLE and the next UNTHROTTLE
  uint64_t other = 0;        // records of other types, ignored
};

// Receives each kept sample; `tid` is the kernel thread id (the sink maps it to a thread
// index and fills SampleRecord::thread and ::object).
struct SampleSink {
  void (*fn)(void* ctx, uint32_t tid, const profile::SampleRecord& rec) = nullptr;
  void* ctx = nullptr;
};

class Decoder {
 public:
  Decoder() = default;
  // Checks the configuration: a source of Pebs or Ibs, a sample_type the parser supports
  // that carries what the source needs (TID always; PEBS: IP, ADDR, DATA_SRC; IBS: RAW).
  static Result<Decoder> make(const DecoderConfig& cfg, SampleSink sink);

  void on_record(const uint8_t* rec, size_t size);
  // Adapter for RingReader::drain (ctx is the Decoder).
  static void record_fn(void* self, const uint8_t* rec, size_t size);

  const DecoderCounters& counters() const { return c_; }

 private:
  void on_sample(const uint8_t* rec, size_t size);
  DecoderConfig cfg_;
  SampleSink sink_;
  DecoderCounters c_;
  uint64_t throttle_start_ = 0;
  bool throttled_ = false;
};

}  // namespace whymiss::pmu
