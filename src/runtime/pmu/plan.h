// What the pmu collector opens: the backend, its events (encoded at detection time, see
// detect.h) and the sample format. The CLI detects once and hands the plan to the injected
// runtime as a string (WHYMISS_PMU_PLAN), so the runtime needs neither libpfm nor sysfs.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <linux/perf_event.h>

#include "model/result.h"

namespace whymiss::pmu {

enum class Backend : uint32_t { None = 0, IntelPebs = 1, AmdIbs = 2 };
const char* backend_name(Backend b);  // "none", "intel-pebs", "amd-ibs"

// Role of an event in the per-thread group.
enum class Role : uint8_t {
  Loads = 0,   // PEBS load latency (MEM_TRANS_RETIRED.LOAD_LATENCY, config1 = ldlat)
  Stores = 1,  // PEBS precise stores
  Ops = 2,     // IBS op sampling (loads and stores told apart by IBS_OP_DATA3)
  Leader = 3,  // counting-only group leader some Intel cores require (mem-loads-aux)
};

struct EventSpec {
  uint32_t type = 0;
  uint64_t config = 0, config1 = 0, config2 = 0;
  uint8_t precise_ip = 0;
  Role role = Role::Loads;
};

inline constexpr int kMaxEvents = 4;

// CachePerf Table 1 for PEBS; IBS carries its registers in RAW and is decoded by us (older
// kernels fill neither DATA_SRC nor ADDR for IBS).
inline constexpr uint64_t kPebsSampleType =
    PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
    PERF_SAMPLE_ADDR | PERF_SAMPLE_PERIOD | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC;
inline constexpr uint64_t kIbsSampleType = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP |
                                           PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                           PERF_SAMPLE_PERIOD | PERF_SAMPLE_RAW;

// IBS op period limits: the hardware counts in units of 16 with a 16-bit max count.
inline constexpr uint64_t kIbsMinPeriod = 0x100, kIbsMaxPeriod = 0xFFFF0;

// The environment variable the CLI sets (plan_to_string) and the runtime reads (parse_plan).
inline constexpr char kPlanEnv[] = "WHYMISS_PMU_PLAN";

struct Plan {
  Backend backend = Backend::None;
  uint32_t event_count = 0;
  EventSpec events[kMaxEvents];
  uint64_t sample_type = 0;
  uint64_t period = 0;          // mean sample period, in events (loads, stores or ops)
  bool exclude_kernel = true;   // false where the PMU refuses the filter (IBS on older kernels)
  uint32_t ring_pages = 64;     // data pages per thread ring, a power of two
  uint32_t family = 0, model = 0;  // cpuid, for IBS decoding
};

// Checks what the runtime relies on: a backend, 1..kMaxEvents events with at most one leader
// (first), a sampling event, the backend's sample format, a period, ring_pages a power of two.
Status validate(const Plan& p);

// "whymiss-pmu-plan/1 backend=2 st=... period=... exk=1 pages=64 fam=25 model=17
//  ev=type,config,config1,config2,precise,role ..." (numbers in decimal).
std::string plan_to_string(const Plan& p);
// Parses and validates; no allocation beyond the error message.
Result<Plan> parse_plan(std::string_view s);

// The period one thread samples with: the plan's mean varied by up to +-12.5% by a hash of the
// thread id and `seed`, so that threads do not sample in lockstep with each other or with a
// loop (CachePerf randomises periods per thread). IBS periods are multiples of 16 within
// [kIbsMinPeriod, kIbsMaxPeriod]. Never 0.
uint64_t thread_period(const Plan& p, uint32_t tid, uint64_t seed);

// The perf_event_attr of event `i` sampling every `period` events: per thread, user space
// (unless exclude_kernel is false), CLOCK_MONOTONIC timestamps, sample_id_all, woken by a
// watermark of a quarter ring rather than per sample. Leaders count and do not sample.
void fill_attr(const Plan& p, int i, uint64_t period, perf_event_attr* attr);

}  // namespace whymiss::pmu
