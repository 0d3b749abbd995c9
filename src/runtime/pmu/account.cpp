#include "runtime/pmu/account.h"

#include <cstdio>

namespace whymiss::pmu {

void fill_meta(const Plan& plan, const DecoderCounters& d, profile::MetaRecord* m) {
  using profile::DiscardReason;
  m->mode = uint32_t(profile::Mode::Pmu);
  m->sample_source = uint32_t(plan.backend == Backend::AmdIbs ? profile::SampleSource::Ibs
                                                              : profile::SampleSource::Pebs);
  m->samples = d.samples;
  m->sample_period_ns = d.samples ? d.period_sum / d.samples : plan.period;
  m->discarded[uint32_t(DiscardReason::NotMemory)] += d.not_memory;
  m->discarded[uint32_t(DiscardReason::NoDecode)] += d.no_address + d.no_ip + d.malformed + d.kernel;
}

std::string describe(const DecoderCounters& d, const RingCounters& r) {
  std::string s;
  auto num = [](uint64_t v) { return std::to_string(v); };
  if (d.kept != d.samples) {
    s = "pmu sampling kept " + num(d.kept) + " of " + num(d.samples) + " samples (";
    std::string parts;
    auto part = [&](uint64_t n, const char* what) {
      if (!n) return;
      if (!parts.empty()) parts += ", ";
      parts += num(n) + " " + what;
    };
    part(d.not_memory, "not memory operations");
    part(d.no_address, "without a data address");
    part(d.no_ip, "without a valid instruction address");
    part(d.kernel, "in the kernel");
    part(d.malformed, "malformed");
    s += parts + ")";
  }
  std::string k;
  if (d.lost || d.lost_samples)
    k = "the kernel lost " + num(d.lost + d.lost_samples) + " records (rings full)";
  if (d.throttles) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", double(d.throttled_ns) / 1e6);
    k += std::string(k.empty() ? "the kernel" : " and") + " throttled sampling " + num(d.throttles) +
         " times for " + ms + " ms";
  }
  if (r.corrupt) k += std::string(k.empty() ? "" : "; ") + num(r.corrupt) + " corrupt ring reads were skipped";
  if (!k.empty()) s += (s.empty() ? "pmu sampling: " : "; ") + k;
  return s;
}

}  // namespace whymiss::pmu
