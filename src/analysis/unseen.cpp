#include "analysis/unseen.h"

#include <algorithm>
#include <map>

namespace whymiss::analysis {

bool is_libc(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base.rfind("libc.so", 0) == 0 || base.rfind("libc-", 0) == 0;
}

UnseenWork unseen_work(const profile::Profile& p, const std::vector<CodeKind>& kinds, const UnseenKnobs& k) {
  UnseenWork u;
  if (p.cpu_sampling.empty()) return u;
  const profile::CpuSamplingRecord& s = p.cpu_sampling.front();
  u.measured = true;
  u.period_ns = s.period_ns;
  u.dropped = s.dropped + s.overruns;
  u.unsampled_threads = s.failed_threads;
  // Modules by start address, for the lookup of each sample's ip.
  std::vector<size_t> order(p.modules.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return p.modules[a].rec.start < p.modules[b].rec.start; });
  auto module_of = [&](uint64_t ip) -> long {
    auto it = std::upper_bound(order.begin(), order.end(), ip,
                               [&](uint64_t v, size_t m) { return v < p.modules[m].rec.start; });
    // Ranges do not overlap, but be safe: look back over a few.
    for (int back = 0; back < 4 && it != order.begin(); ++back) {
      --it;
      const auto& r = p.modules[*it].rec;
      if (ip >= r.start && ip < r.end) return long(*it);
    }
    return -1;
  };
  std::map<long, uint64_t> unseen;  // module index (-1: none) -> samples
  for (const auto& c : p.cpu_samples) {
    if (c.flags & profile::kCpuSampleInRuntime) {
      ++u.whymiss_samples;
      continue;
    }
    const long m = module_of(c.ip);
    const CodeKind kind = m < 0 ? CodeKind::NotInstrumented
                                : size_t(m) < kinds.size() ? kinds[size_t(m)] : CodeKind::Unreadable;
    if (kind == CodeKind::WhymissRuntime) ++u.whymiss_samples;
    else if (kind == CodeKind::Instrumented) ++u.instrumented_samples;
    else ++unseen[m];
  }
  for (const auto& [m, n] : unseen) {
    ModuleTime t;
    if (m >= 0) {
      t.path = p.modules[size_t(m)].path;
      t.kind = size_t(m) < kinds.size() ? kinds[size_t(m)] : CodeKind::Unreadable;
      t.partly_seen = is_libc(t.path);
    }
    t.samples = n;
    u.unseen_samples += n;
    u.modules.push_back(t);
  }
  u.samples = u.instrumented_samples + u.unseen_samples;
  for (auto& t : u.modules) t.share = double(t.samples) / double(u.samples);
  std::stable_sort(u.modules.begin(), u.modules.end(),
                   [](const ModuleTime& a, const ModuleTime& b) { return a.samples > b.samples; });
  u.unseen_share = u.samples ? double(u.unseen_samples) / double(u.samples) : 0;
  u.enough = u.samples >= k.min_samples;
  u.warn = u.enough && u.unseen_share >= k.warn_share;
  return u;
}

}  // namespace whymiss::analysis
