// Where the data of a sampled access came from, as a level index of the profile's geometry:
// 0 = L1 hit, i = missed levels [0, i) and was served by level i, `levels` = beyond the last
// modelled cache (local or remote DRAM, another socket's cache, PMEM, CXL). Anything not 0 is a
// miss. When the hardware only says "missed level n" the index is n (a lower bound).
//
// Two decoders: the kernel's generic perf_mem_data_src (PERF_SAMPLE_DATA_SRC, filled by Intel
// PEBS) and AMD IBS op registers from PERF_SAMPLE_RAW. Both are pure functions of their inputs.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/profile.h"

namespace whymiss::pmu {

struct Level {
  uint8_t level = profile::kLevelUnknown;  // index as above, or kLevelUnknown
  uint8_t flags = 0;                       // profile::kAccessRead / kAccessWrite (0: not said)
  bool hitm = false;    // served by another core's cache holding the line modified
  bool remote = false;  // served by another node / socket
};

// perf_mem_data_src (bit layout of linux/perf_event.h: mem_op 0-4, mem_lvl 5-18, mem_snoop
// 19-23, mem_lvl_num 33-36, mem_remote 37, mem_snoopx 38-39). The numeric level field wins
// when present; otherwise the older PERF_MEM_LVL_* bits are read. LFB (a fill buffer hit: the
// line was already being fetched after an earlier L1 miss) counts as an L1 miss served from L2.
// I/O and uncached memory, and "not available", give kLevelUnknown.
Level level_from_data_src(uint64_t data_src, uint32_t levels);

// AMD IBS op sample, raw data as the kernel writes it for the ibs_op PMU: u32 caps
// (CPUID Fn8000_001B_EAX) then u64 IBS_OP_CTL, IBS_OP_RIP, IBS_OP_DATA, IBS_OP_DATA2,
// IBS_OP_DATA3, IBS_DC_LINADDR, IBS_DC_PHYSADDR [, IBS_BR_TARGET, IBS_OP_DATA4].
inline constexpr uint32_t kIbsCapsRipInvalidChk = 1u << 7, kIbsCapsZen4 = 1u << 11;
inline constexpr size_t kIbsRawMin = 4 + 7 * 8;

struct IbsOp {
  uint64_t ip = 0;       // IBS_OP_RIP
  uint64_t addr = 0;     // IBS_DC_LINADDR
  bool ip_valid = false, addr_valid = false;
  Level level;           // flags 0 when the op is neither load nor store
  uint32_t latency = 0;  // IbsDcMissLat (cycles) for loads that missed L1, else 0
};

// `family`/`model` of the CPU (cpuid) select the data-source encoding and errata: before
// family 17h only L1 hit / miss is decoded (level 0 or 1); 17h and 18h use the 3-bit DataSrc;
// caps bit 11 (Zen 4 and later) the 5-bit one. Returns false when `raw` is too short.
bool decode_ibs_op(const uint8_t* raw, size_t size, uint32_t family, uint32_t model,
                   uint32_t levels, IbsOp* out);

}  // namespace whymiss::pmu
