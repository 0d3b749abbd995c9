#include "runtime/pmu/levels.h"

#include <linux/perf_event.h>

#include <cstring>

namespace whymiss::pmu {
namespace {

uint8_t clamp(uint32_t index, uint32_t levels) {
  return static_cast<uint8_t>(index < levels ? index : levels);
}

uint64_t bits(uint64_t v, int shift, uint64_t mask) { return (v >> shift) & mask; }

uint8_t access_flags(uint64_t op) {
  uint8_t f = 0;
  if (op & PERF_MEM_OP_LOAD) f |= profile::kAccessRead;
  if (op & PERF_MEM_OP_STORE) f |= profile::kAccessWrite;
  return f;
}

}  // namespace

Level level_from_data_src(uint64_t ds, uint32_t levels) {
  Level out;
  const uint64_t op = bits(ds, PERF_MEM_OP_SHIFT, 0x1f);
  const uint64_t lvl = bits(ds, PERF_MEM_LVL_SHIFT, 0x3fff);
  const uint64_t snoop = bits(ds, PERF_MEM_SNOOP_SHIFT, 0x1f);
  const uint64_t num = bits(ds, PERF_MEM_LVLNUM_SHIFT, 0xf);
  const bool remote_bit = bits(ds, PERF_MEM_REMOTE_SHIFT, 1) != 0;
  out.flags = (op & PERF_MEM_OP_NA) ? 0 : access_flags(op);
  out.hitm = (snoop & PERF_MEM_SNOOP_HITM) != 0;
  const bool hit = (lvl & PERF_MEM_LVL_MISS) == 0;

  // cache: 1-based cache level that served (hit) or missed (miss); memory: beyond all caches.
  uint32_t cache = 0;
  bool memory = false;
  if (num != 0 && num != PERF_MEM_LVLNUM_NA) {
    switch (num) {
      case PERF_MEM_LVLNUM_L1: case PERF_MEM_LVLNUM_L2: case PERF_MEM_LVLNUM_L3:
      case PERF_MEM_LVLNUM_L4:
        cache = static_cast<uint32_t>(num);
        break;
      case PERF_MEM_LVLNUM_LFB:
        out.level = clamp(1, levels);
        return out;
      case PERF_MEM_LVLNUM_RAM: case PERF_MEM_LVLNUM_PMEM: case PERF_MEM_LVLNUM_CXL:
        memory = true;
        break;
      default:  // I/O, "any cache", unknown encodings
        return out;
    }
    out.remote = remote_bit;
  } else {
    if (lvl == 0 || (lvl & PERF_MEM_LVL_NA)) return out;
    if (lvl & PERF_MEM_LVL_L1) cache = 1;
    else if (lvl & PERF_MEM_LVL_LFB) { out.level = clamp(1, levels); return out; }
    else if (lvl & PERF_MEM_LVL_L2) cache = 2;
    else if (lvl & PERF_MEM_LVL_L3) cache = 3;
    else if (lvl & (PERF_MEM_LVL_LOC_RAM | PERF_MEM_LVL_REM_RAM1 | PERF_MEM_LVL_REM_RAM2 |
                    PERF_MEM_LVL_REM_CCE1 | PERF_MEM_LVL_REM_CCE2)) {
      memory = true;
      out.remote = (lvl & PERF_MEM_LVL_LOC_RAM) == 0;
    } else {
      return out;  // I/O, uncached
    }
    out.remote = out.remote || remote_bit;
  }
  // Another node's cache costs what memory does: it is beyond the modelled hierarchy.
  if (memory || out.remote) out.level = clamp(levels, levels);
  else out.level = clamp(hit ? cache - 1 : cache, levels);
  return out;
}

bool decode_ibs_op(const uint8_t* raw, size_t size, uint32_t family, uint32_t model,
                   uint32_t levels, IbsOp* out) {
  *out = IbsOp{};
  if (!raw || size < kIbsRawMin) return false;
  uint32_t caps;
  uint64_t r[7];
  std::memcpy(&caps, raw, 4);
  std::memcpy(r, raw + 4, sizeof r);
  const uint64_t data = r[2], data3 = r[4];
  uint64_t data2 = r[3];
  auto bit = [](uint64_t v, int b) { return ((v >> b) & 1) != 0; };

  out->ip = r[1];
  out->ip_valid = !((caps & kIbsCapsRipInvalidChk) && bit(data, 38));
  out->addr = r[5];
  out->addr_valid = bit(data3, 17);
  const bool load = bit(data3, 0), store = bit(data3, 1);
  if (load) out->level.flags |= profile::kAccessRead;
  if (store) out->level.flags |= profile::kAccessWrite;
  if (!load && !store) return true;

  const bool dc_miss = bit(data3, 7), uc = bit(data3, 14), no_mab = bit(data3, 16);
  const bool l2_miss = bit(data3, 20), sw_pf = bit(data3, 21);
  const bool zen4 = (caps & kIbsCapsZen4) != 0;
  // Erratum 1293 (family 19h models 0-Fh): for software prefetches and MAB-less misses, L2Miss
  // and OP_DATA2 are not to be trusted.
  const bool erratum = family == 0x19 && model <= 0xF && (sw_pf || no_mab);
  if (erratum) data2 = 0;
  const uint32_t src = zen4 ? static_cast<uint32_t>(((data2 >> 6) & 3) << 3 | (data2 & 7))
                            : static_cast<uint32_t>(data2 & 7);
  const uint32_t kIo = 7;
  if (load && dc_miss) out->latency = static_cast<uint32_t>((data3 >> 32) & 0xffff);
  Level& lv = out->level;
  if (uc && src != kIo) return true;  // uncached: miss bits are not valid
  if (!dc_miss) { lv.level = 0; return true; }
  if (family < 0x17) { lv.level = clamp(1, levels); return true; }
  if (!l2_miss && !erratum) { lv.level = clamp(1, levels); return true; }

  if (load) {  // OP_DATA2 describes loads only
    bool cache_src = false;
    const bool rmt = bit(data2, 4);
    if (zen4) {
      switch (src) {
        case 1: lv.level = clamp(2, levels); cache_src = true; break;  // L3 of this CCX
        case 2: lv.level = clamp(levels, levels); cache_src = true; break;  // near CCX's cache
        case 5: lv.level = clamp(levels, levels); cache_src = true; lv.remote = true; break;
        case 3: case 6: case 8: case 12:  // DRAM, PMEM, extension memory, peer agent memory
          lv.level = clamp(levels, levels); lv.remote = rmt; break;
        case kIo: return true;
        default: break;
      }
    } else {
      switch (src) {
        case 2: lv.level = clamp(2, levels); cache_src = true; break;  // L3 or a peer in the CCX
        case 4: lv.level = clamp(levels, levels); cache_src = true; lv.remote = true; break;
        case 3: lv.level = clamp(levels, levels); lv.remote = rmt; break;
        case kIo: return true;
        default: break;
      }
    }
    // CacheHitSt (bit 5): 0 = the line was Modified in the cache that supplied it. Not valid
    // on family 19h models 0-Fh and 20h-5Fh.
    const bool hit_st_valid = !(family == 0x19 && (model <= 0xF || (model >= 0x20 && model <= 0x5F)));
    if (cache_src && hit_st_valid && !bit(data2, 5)) lv.hitm = true;
    if (lv.level != profile::kLevelUnknown) return true;
  }
  // No data source: a miss that merged into an outstanding one came from beyond L1; an L2
  // miss from beyond L2 (lower bounds).
  if (no_mab && !erratum) lv.level = clamp(1, levels);
  else lv.level = clamp(l2_miss ? 2 : 1, levels);
  return true;
}

}  // namespace whymiss::pmu
