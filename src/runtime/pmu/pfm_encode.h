// libpfm4 event encoding, isolated: libpfm's perf_event.h and the kernel's cannot share a
// translation unit. Initialises libpfm once (not thread-safe; call from start-up code).
#pragma once
#include <cstdint>
#include <string>

namespace whymiss::pmu {

// Encodes `name` (e.g. "MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=30") for perf_event_open at user
// level. False with a sentence in *why when libpfm cannot initialise, knows no PMU for this
// CPU, or the CPU's PMU has no such event.
bool pfm_encode(const char* name, uint32_t* type, uint64_t* config, uint64_t* config1,
                std::string* why);

}  // namespace whymiss::pmu
