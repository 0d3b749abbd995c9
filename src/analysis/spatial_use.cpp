#include "analysis/spatial_use.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace whymiss::analysis {

SpatialUse spatial_use(const profile::Profile& p, TypeOracle& oracle) {
  SpatialUse s;
  if (profile::Mode(p.meta.mode) != profile::Mode::Exact) {
    s.reason = "spatial use is counted in exact mode only (sampling modes do not see every byte "
               "a line's stay in the cache touched)";
    return s;
  }
  if (p.object_use_info.empty()) {
    s.reason = "this profile has no spatial-use records (recorded with WHYMISS_SPATIAL=0, with "
               "lines larger than 64 bytes, or by an older build)";
    return s;
  }
  const auto& info = p.object_use_info[0];
  s.available = true;
  s.line_bytes = info.line_bytes;
  s.evicted_lines = info.evicted_lines;
  s.outside_lines = info.outside_lines;
  s.dropped_lines = info.dropped_lines;

  std::unordered_map<uint64_t, size_t> by_serial;
  for (size_t i = 0; i < p.objects.size(); ++i) by_serial.emplace(p.objects[i].serial, i);
  struct Acc {
    TypeUse t;
    uint64_t fetched[profile::kUsePhases] = {}, touched[profile::kUsePhases] = {};
  };
  std::map<const DataType*, Acc> acc;
  for (const auto& u : p.object_use) {
    auto it = by_serial.find(u.serial);
    const DataType* dt = it == by_serial.end() ? nullptr : oracle.heap_type(p, p.objects[it->second]);
    if (!dt) {
      s.untyped_lines += u.lines;
      continue;
    }
    Acc& a = acc[dt];
    a.t.objects++;
    a.t.lines += u.lines;
    a.t.fetched += u.fetched_bytes;
    a.t.touched += u.touched_bytes;
    for (int i = 0; i < profile::kUsePhases; ++i) a.fetched[i] += u.fetched[i], a.touched[i] += u.touched[i];
  }
  for (auto& [dt, a] : acc) {
    TypeUse t = a.t;
    t.name = dt->name;
    t.size = dt->size;
    t.type = dt;
    t.use = t.fetched ? double(t.touched) / double(t.fetched) : 0;
    t.per_field = dt->size > 0 && profile::kUsePhases % dt->size == 0;
    if (t.per_field) {
      // Phase ph holds byte ph mod size of an element. Bytes covered by no field are padding.
      auto add_range = [&](const std::string& name, uint64_t off, uint64_t size) {
        FieldUse f;
        f.name = name;
        f.offset = off;
        f.size = size;
        for (uint64_t ph = 0; ph < uint64_t(profile::kUsePhases); ++ph)
          if (ph % dt->size >= off && ph % dt->size < off + size)
            f.fetched += a.fetched[ph], f.touched += a.touched[ph];
        f.use = f.fetched ? double(f.touched) / double(f.fetched) : 0;
        f.riding = f.fetched > 0 && f.use < kRidingShare && t.touched > f.touched;
        t.fields.push_back(f);
      };
      if (dt->fields.empty()) {
        add_range(dt->name, 0, dt->size);
      } else {
        uint64_t at = 0;
        for (const auto& fd : dt->fields) {
          if (fd.offset > at) add_range("(padding)", at, fd.offset - at);
          add_range(fd.name, fd.offset, fd.size);
          at = std::max(at, fd.offset + fd.size);
        }
        if (at < dt->size) add_range("(padding)", at, dt->size - at);
      }
    }
    s.types.push_back(std::move(t));
  }
  std::stable_sort(s.types.begin(), s.types.end(), [](const TypeUse& a, const TypeUse& b) {
    return a.lines != b.lines ? a.lines > b.lines : a.name < b.name;
  });
  return s;
}

const TypeUse* find_type_use(const SpatialUse& s, const std::string& name) {
  for (const auto& t : s.types)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace whymiss::analysis
