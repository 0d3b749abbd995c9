#include "analysis/sets.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace whymiss::analysis {

const char* sets_source(const profile::Profile& p) {
  switch (profile::Mode(p.meta.mode)) {
    case profile::Mode::Exact: return "counted";
    case profile::Mode::Soft: return "estimated";
    default: return "sampled";
  }
}

void Rcd::add(const profile::RcdRecord& r) {
  first += r.first;
  for (int b = 0; b < profile::kRcdBuckets; ++b) {
    buckets[b] += r.buckets[b];
    pairs += r.buckets[b];
    if (b < kRcdShortBuckets) short_ += r.buckets[b];
  }
}

int Rcd::median_bucket() const {
  if (!pairs) return -1;
  uint64_t seen = 0;
  for (int b = 0; b < profile::kRcdBuckets; ++b) {
    seen += buckets[b];
    if (2 * seen >= pairs) return b;
  }
  return profile::kRcdBuckets - 1;
}

namespace {

SetLevel level_of(const profile::Profile& p, int l, const std::vector<const profile::SetCountRecord*>& recs) {
  SetLevel out;
  out.level = l;
  const LevelGeometry& lg = p.geometry.levels[size_t(l)];
  out.name = lg.name;
  out.sets = lg.sets();
  out.folded = out.sets > profile::kMaxSetRecords;
  out.rows = std::min<uint64_t>(out.sets, profile::kMaxSetRecords);
  std::vector<SetRow> rows;
  rows.reserve(recs.size());
  for (const auto* r : recs) {
    SetRow row;
    row.set = r->set;
    for (int k = 0; k < profile::kKinds; ++k) {
      row.by_kind[k] = r->by_kind[k];
      row.accesses += r->by_kind[k];
      if (k) row.misses += r->by_kind[k];
    }
    out.accesses += row.accesses;
    out.misses += row.misses;
    out.sets_with_misses += row.misses > 0;
    rows.push_back(row);
  }
  for (auto& r : rows) r.share = out.misses ? double(r.misses) / double(out.misses) : 0;
  // Bins of contiguous sets, in set order.
  const uint64_t nbins = std::min<uint64_t>(out.rows ? out.rows : 1, kMaxBins);
  const uint64_t per = (out.rows + nbins - 1) / nbins;
  out.bins.resize(nbins);
  for (uint64_t b = 0; b < nbins; ++b) {
    out.bins[b].first = uint32_t(b * per);
    out.bins[b].last = uint32_t(std::min(out.rows, (b + 1) * per) - 1);
  }
  for (const auto& r : rows) {
    SetBin& bin = out.bins[std::min<uint64_t>(r.set / per, nbins - 1)];
    bin.accesses += r.accesses;
    bin.misses += r.misses;
  }
  // Most misses first (ties: lower set first).
  std::sort(rows.begin(), rows.end(), [](const SetRow& a, const SetRow& b) {
    return a.misses != b.misses ? a.misses > b.misses : a.set < b.set;
  });
  const uint64_t eighth = std::max<uint64_t>(1, out.rows / 8);
  uint64_t top = 0;
  for (uint64_t i = 0; i < eighth && i < rows.size(); ++i) top += rows[i].misses;
  out.hottest_eighth_share = out.misses ? double(top) / double(out.misses) : 0;
  const double mean = out.rows ? double(out.misses) / double(out.rows) : 0;
  for (const auto& r : rows) {
    if (out.hot.size() == kMaxHot || r.misses < kHotMin || double(r.misses) < kHotFactor * mean) break;
    out.hot.push_back(r);
  }
  return out;
}

}  // namespace

SetsView analyze_sets(const profile::Profile& p, const Analysis& a) {
  SetsView v;
  v.source = sets_source(p);
  const int nlevels = int(p.geometry.levels.size());
  std::vector<std::vector<const profile::SetCountRecord*>> by_level(size_t(std::max(nlevels, 0)));
  for (const auto& r : p.set_counts)
    if (int(r.level) < nlevels) by_level[r.level].push_back(&r);
  for (int l = 0; l < nlevels; ++l)
    if (!by_level[size_t(l)].empty()) v.levels.push_back(level_of(p, l, by_level[size_t(l)]));

  std::unordered_map<uint64_t, Rcd> by_ip;
  for (const auto& r : p.rcd) {
    by_ip[r.ip].add(r);
    v.l1_sets = r.l1_sets;
  }
  std::unordered_map<uint64_t, const profile::InstructionRecord*> instr;
  for (const auto& i : p.instructions) instr[i.ip] = &i;
  for (const auto& [ip, rcd] : by_ip) {
    RcdInstr ri;
    ri.ip = ip;
    ri.rcd = rcd;
    if (auto it = instr.find(ip); it != instr.end())
      for (int k = 1; k < profile::kKinds; ++k) {
        ri.by_kind[k] = it->second->misses[0][k];
        ri.l1_misses += ri.by_kind[k];
      }
    v.instructions.push_back(ri);
  }
  std::sort(v.instructions.begin(), v.instructions.end(), [](const RcdInstr& x, const RcdInstr& y) {
    const uint64_t nx = x.rcd.pairs + x.rcd.first, ny = y.rcd.pairs + y.rcd.first;
    return nx != ny ? nx > ny : x.ip < y.ip;
  });
  if (v.instructions.size() > kMaxInstructions) v.instructions.resize(kMaxInstructions);
  for (size_t f = 0; f < a.findings.size(); ++f) {
    RcdFinding rf;
    rf.finding = f;
    for (const auto& in : a.findings[f].instructions)
      if (auto it = by_ip.find(in.ip); it != by_ip.end()) {
        const Rcd& r = it->second;
        rf.rcd.first += r.first;
        rf.rcd.pairs += r.pairs;
        rf.rcd.short_ += r.short_;
        for (int b = 0; b < profile::kRcdBuckets; ++b) rf.rcd.buckets[b] += r.buckets[b];
      }
    if (rf.rcd.pairs + rf.rcd.first) v.findings.push_back(rf);
  }
  return v;
}

}  // namespace whymiss::analysis
