#include "analysis/working_set.h"

#include <algorithm>
#include <map>

namespace whymiss::analysis {
namespace {

WsGroup ws_group(std::string type, bool heap, uint32_t site) {
  WsGroup g;
  g.type = std::move(type);
  g.heap = heap;
  g.site = site;
  return g;
}

}  // namespace

WorkingSet working_set(const profile::Profile& p, TypeOracle& types) {
  WorkingSet w;
  const bool exact = p.meta.mode == uint32_t(profile::Mode::Exact);
  if (!exact && p.working_set_info.empty()) {
    w.unavailable = "working sets need the simulated caches' contents: exact mode counts them, soft mode "
                    "estimates them from its trace windows' replay, and this profile has neither";
    return w;
  }
  if (p.working_set_info.empty()) {
    w.unavailable = "the profile has no working-set samples (recorded with WHYMISS_WORKING_SET=0, "
                    "or by an older whymiss)";
    return w;
  }
  const auto& info = p.working_set_info[0];
  if (info.samples == 0) {
    // The runtime walks the caches only while their accesses are serialised (one thread, or the
    // relay); the end of the run always gets a sample then.
    w.unavailable = "no working-set sample was taken (the program's threads ran the simulator "
                    "under locks, without the relay, so its caches were never still)";
    return w;
  }
  w.available = true;
  w.replayed = !exact;
  w.estimated = !exact;
  w.period = info.period;
  w.dropped_lines = info.dropped_lines;
  // As many samples as the records name (a corrupted count must not size anything).
  uint64_t named = 0;
  for (const auto& r : p.working_set) named = std::max<uint64_t>(named, uint64_t(r.sample) + 1);
  w.samples.resize(std::min<uint64_t>(info.samples, named));
  const size_t nlevels = std::min(p.geometry.levels.size(), size_t(profile::kLevels));
  for (size_t l = 0; l < nlevels; ++l) {
    w.capacity_lines[l] = p.geometry.levels[l].sets() * p.geometry.levels[l].ways;
    w.set_step[l] = info.set_step[l] ? info.set_step[l] : 1;  // (0: a profile before set steps)
    w.estimated |= w.set_step[l] > 1;
  }
  std::map<std::string, size_t> by_type;
  std::map<uint32_t, size_t> by_site;
  for (const auto& r : p.working_set) {
    if (r.sample >= w.samples.size() || r.level >= nlevels) continue;
    w.samples[r.sample] = WsSample{r.time_ns, r.l1_misses};
    const DataType* t = nullptr;
    if (r.site != profile::kWsNotHeap && r.example_serial != 0) {
      profile::ObjectRecord o{};
      o.serial = r.example_serial;
      o.start = r.example_start;
      o.size = r.example_size;
      o.site = r.site;
      t = types.heap_type(p, o);
    }
    size_t gi;
    if (t != nullptr) {
      auto [it, fresh] = by_type.try_emplace(t->name, w.groups.size());
      if (fresh) w.groups.push_back(ws_group(t->name, true, r.site));
      gi = it->second;
    } else {
      auto [it, fresh] = by_site.try_emplace(r.site, w.groups.size());
      if (fresh) w.groups.push_back(ws_group("", r.site != profile::kWsNotHeap, r.site));
      gi = it->second;
    }
    WsGroup& g = w.groups[gi];
    if (std::find(g.sites.begin(), g.sites.end(), r.site) == g.sites.end()) g.sites.push_back(r.site);
    if (g.lines.size() < w.samples.size()) g.lines.resize(w.samples.size());
    g.lines[r.sample][r.level] += r.lines;
  }
  for (WsGroup& g : w.groups) {
    g.lines.resize(w.samples.size());
    std::sort(g.sites.begin(), g.sites.end());
    for (const auto& s : g.lines)
      for (size_t l = 0; l < nlevels; ++l) g.peak[l] = std::max(g.peak[l], s[l]);
  }
  const size_t last = nlevels ? nlevels - 1 : 0;
  std::sort(w.groups.begin(), w.groups.end(), [&](const WsGroup& a, const WsGroup& b) {
    if (a.peak[last] != b.peak[last]) return a.peak[last] > b.peak[last];
    if (a.peak[0] != b.peak[0]) return a.peak[0] > b.peak[0];
    return a.site < b.site;
  });
  return w;
}

}  // namespace whymiss::analysis
