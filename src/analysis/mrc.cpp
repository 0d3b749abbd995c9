#include "analysis/mrc.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

namespace whymiss::analysis {
namespace {

// The tracker's account of a line size (older profiles have none: nothing dropped).
uint64_t dropped_at(const profile::Profile& p, uint32_t line_bytes) {
  for (const auto& i : p.reuse_info)
    if (i.line_bytes == line_bytes) return i.dropped;
  return 0;
}

// Accesses at a line size: the profile's, plus those only that line size splits in two.
uint64_t accesses_at(const profile::Profile& p, uint32_t line_bytes) {
  for (const auto& i : p.reuse_info)
    if (i.line_bytes == line_bytes) return p.meta.accesses + i.extra_accesses;
  return p.meta.accesses;
}

std::string how_of(double rate, uint64_t dropped, const profile::Profile& p) {
  std::string how;
  char b[96];
  if (rate < 1) {
    std::snprintf(b, sizeof b, "sampled (%.3g %% of lines followed)", 100 * rate);
    how = b;
  }
  if (dropped > 0) {
    std::snprintf(b, sizeof b, "partial (%llu accesses not followed, counted as hits)",
                  static_cast<unsigned long long>(dropped));
    how += how.empty() ? b : std::string("; ") + b;
  }
  if (how.empty()) how = "counted";
  // A thread's repeat of its own previous line skips the tracker and counts as distance 0, even
  // when other threads used lines in between: with several threads the curve is approximate.
  if (p.threads.size() > 1) how += "; threads' accesses merged into one stream, approximate";
  return how;
}

}  // namespace

std::vector<uint64_t> mrc_sizes(const profile::Profile& p) {
  std::vector<uint64_t> v;
  for (uint64_t s = 1024; s <= (uint64_t(1) << 30); s *= 2) v.push_back(s);
  for (const auto& l : p.geometry.levels)
    for (uint64_t s : {l.size / 2, l.size, l.size * 2})
      if (s >= 1024) v.push_back(s);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

double miss_ratio_at(const profile::ReuseRecord& r, uint64_t accesses, uint64_t size_bytes) {
  if (accesses == 0 || r.line_bytes == 0) return 0;
  const double lines = double(size_bytes) / double(r.line_bytes);
  double misses = r.cold;
  for (int b = 0; b < profile::kReuseBuckets; ++b) {
    if (r.buckets[b] == 0) continue;
    const double lo = double(profile::reuse_bucket_low(b));
    const double hi = b + 1 < profile::kReuseBuckets ? double(profile::reuse_bucket_low(b + 1)) : lo * 2;
    if (lo >= lines) misses += r.buckets[b];
    else if (hi > lines) misses += r.buckets[b] * (hi - lines) / (hi - lo);  // part of the bucket
  }
  return std::min(1.0, misses / double(accesses));
}

std::optional<Mrc> program_mrc(const profile::Profile& p, uint32_t line_bytes) {
  if (line_bytes == 0) line_bytes = p.geometry.line();
  for (const auto& r : p.reuse) {
    if (r.scope != profile::kReuseProgram || r.line_bytes != line_bytes) continue;
    Mrc m;
    m.line = line_bytes;
    m.rate = r.rate;
    m.dropped = dropped_at(p, line_bytes);
    m.how = how_of(r.rate, m.dropped, p);
    const uint64_t accesses = accesses_at(p, line_bytes);
    for (uint64_t s : mrc_sizes(p)) m.points.push_back({s, miss_ratio_at(r, accesses, s)});
    return m;
  }
  return std::nullopt;
}

std::vector<uint32_t> other_mrc_lines(const profile::Profile& p) {
  std::vector<uint32_t> v;
  const uint32_t line = p.geometry.line();
  for (uint32_t l : {2 * line, line / 2})
    for (const auto& r : p.reuse)
      if (r.scope == profile::kReuseProgram && r.line_bytes == l) {
        v.push_back(l);
        break;
      }
  return v;
}

std::optional<Mrc> instructions_mrc(const profile::Profile& p, const std::vector<uint64_t>& ips_in) {
  std::vector<uint64_t> ips = ips_in;
  std::sort(ips.begin(), ips.end());
  ips.erase(std::unique(ips.begin(), ips.end()), ips.end());
  if (ips.empty()) return std::nullopt;
  std::unordered_map<uint64_t, const profile::ReuseRecord*> hist;
  for (const auto& r : p.reuse)
    if (r.scope == profile::kReuseInstruction) hist[r.key] = &r;
  std::unordered_map<uint64_t, uint64_t> accesses;
  for (const auto& ir : p.instructions) accesses[ir.ip] = ir.accesses[0] + ir.accesses[1];
  profile::ReuseRecord sum{};
  uint64_t total = 0;
  for (uint64_t ip : ips) {
    auto it = hist.find(ip);
    if (it == hist.end()) return std::nullopt;
    const profile::ReuseRecord& r = *it->second;
    sum.line_bytes = r.line_bytes;
    sum.rate = r.rate;
    sum.cold += r.cold;
    for (int b = 0; b < profile::kReuseBuckets; ++b) sum.buckets[b] += r.buckets[b];
    total += accesses[ip];
  }
  if (total == 0) return std::nullopt;
  Mrc m;
  m.line = sum.line_bytes;
  m.rate = sum.rate;
  m.dropped = dropped_at(p, sum.line_bytes);
  m.how = how_of(sum.rate, m.dropped, p);
  for (uint64_t s : mrc_sizes(p)) m.points.push_back({s, miss_ratio_at(sum, total, s)});
  return m;
}

}  // namespace whymiss::analysis
