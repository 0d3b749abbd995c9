#include "runtime/pmu/plan.h"

#include <unistd.h>

#include <charconv>
#include <cstring>
#include <ctime>

namespace whymiss::pmu {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::IntelPebs: return "intel-pebs";
    case Backend::AmdIbs: return "amd-ibs";
    default: return "none";
  }
}

Status validate(const Plan& p) {
  if (p.backend != Backend::IntelPebs && p.backend != Backend::AmdIbs)
    return make_error("The pmu plan names no backend.");
  if (p.event_count == 0 || p.event_count > kMaxEvents)
    return make_error("The pmu plan must have 1 to 4 events.");
  bool sampling = false;
  for (uint32_t i = 0; i < p.event_count; ++i) {
    const Role r = p.events[i].role;
    if (r > Role::Leader) return make_error("The pmu plan has an event of unknown role.");
    if (r == Role::Leader && i != 0) return make_error("The pmu plan's group leader must come first.");
    if (r != Role::Leader) sampling = true;
    if ((p.backend == Backend::AmdIbs) != (r == Role::Ops))
      return make_error("The pmu plan's event roles do not match its backend.");
  }
  if (!sampling) return make_error("The pmu plan has no sampling event.");
  const uint64_t want = p.backend == Backend::AmdIbs ? kIbsSampleType : kPebsSampleType;
  if (p.sample_type != want) return make_error("The pmu plan's sample format is not the backend's.");
  if (p.period == 0) return make_error("The pmu plan's sample period is 0.");
  if (p.ring_pages == 0 || (p.ring_pages & (p.ring_pages - 1)) || p.ring_pages > 4096)
    return make_error("The pmu plan's ring size must be a power of two up to 4096 pages.");
  return Ok{};
}

std::string plan_to_string(const Plan& p) {
  std::string s = "whymiss-pmu-plan/1";
  auto kv = [&](const char* k, uint64_t v) {
    s += ' ';
    s += k;
    s += '=';
    s += std::to_string(v);
  };
  kv("backend", static_cast<uint64_t>(p.backend));
  kv("st", p.sample_type);
  kv("period", p.period);
  kv("exk", p.exclude_kernel ? 1 : 0);
  kv("pages", p.ring_pages);
  kv("fam", p.family);
  kv("model", p.model);
  for (uint32_t i = 0; i < p.event_count && i < kMaxEvents; ++i) {
    const EventSpec& e = p.events[i];
    s += " ev=" + std::to_string(e.type) + ',' + std::to_string(e.config) + ',' +
         std::to_string(e.config1) + ',' + std::to_string(e.config2) + ',' +
         std::to_string(e.precise_ip) + ',' + std::to_string(static_cast<int>(e.role));
  }
  return s;
}

namespace {
bool number(std::string_view v, uint64_t* out) {
  if (v.empty()) return false;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  return ec == std::errc() && end == v.data() + v.size();
}
}  // namespace

Result<Plan> parse_plan(std::string_view s) {
  const std::string_view magic = "whymiss-pmu-plan/1";
  if (s.substr(0, magic.size()) != magic) return make_error("The pmu plan has no known version tag.");
  Plan p;
  s.remove_prefix(magic.size());
  while (!s.empty()) {
    if (s.front() == ' ') { s.remove_prefix(1); continue; }
    size_t sp = s.find(' ');
    std::string_view tok = s.substr(0, sp);
    s = sp == std::string_view::npos ? std::string_view{} : s.substr(sp);
    size_t eq = tok.find('=');
    if (eq == std::string_view::npos) return make_error("The pmu plan has a field without a value.");
    std::string_view k = tok.substr(0, eq), v = tok.substr(eq + 1);
    uint64_t n = 0;
    if (k == "ev") {
      if (p.event_count == kMaxEvents) return make_error("The pmu plan has too many events.");
      uint64_t f[6];
      for (int i = 0; i < 6; ++i) {
        size_t c = v.find(',');
        if ((i < 5) == (c == std::string_view::npos) || !number(v.substr(0, c), &f[i]))
          return make_error("The pmu plan has a malformed event.");
        v = c == std::string_view::npos ? std::string_view{} : v.substr(c + 1);
      }
      if (f[0] > UINT32_MAX || f[4] > 3 || f[5] > 3) return make_error("The pmu plan has an event out of range.");
      EventSpec& e = p.events[p.event_count++];
      e.type = static_cast<uint32_t>(f[0]);
      e.config = f[1];
      e.config1 = f[2];
      e.config2 = f[3];
      e.precise_ip = static_cast<uint8_t>(f[4]);
      e.role = static_cast<Role>(f[5]);
      continue;
    }
    if (!number(v, &n)) return make_error("The pmu plan has a malformed number.");
    if (k == "backend") p.backend = static_cast<Backend>(n > 2 ? 0 : n);
    else if (k == "st") p.sample_type = n;
    else if (k == "period") p.period = n;
    else if (k == "exk") p.exclude_kernel = n != 0;
    else if (k == "pages") p.ring_pages = static_cast<uint32_t>(n > 4096 ? 0 : n);
    else if (k == "fam") p.family = static_cast<uint32_t>(n & 0xffff);
    else if (k == "model") p.model = static_cast<uint32_t>(n & 0xffff);
    else return make_error("The pmu plan has an unknown field.");
  }
  Status st = validate(p);
  if (!st.ok()) return make_error(st.error());
  return p;
}

uint64_t thread_period(const Plan& p, uint32_t tid, uint64_t seed) {
  uint64_t h = (seed ^ (uint64_t(tid) * 0x9E3779B97F4A7C15ull)) + 0x632BE59BD9B4E019ull;
  h = (h ^ (h >> 31)) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  const uint64_t mean = p.period ? p.period : 1;
  const uint64_t span = mean / 4;  // +-12.5%
  uint64_t v = mean - span / 2 + (span ? h % (span + 1) : 0);
  if (p.backend == Backend::AmdIbs) {
    v &= ~uint64_t(0xF);
    if (v < kIbsMinPeriod) v = kIbsMinPeriod;
    if (v > kIbsMaxPeriod) v = kIbsMaxPeriod;
  }
  return v ? v : 1;
}

void fill_attr(const Plan& p, int i, uint64_t period, perf_event_attr* a) {
  std::memset(a, 0, sizeof *a);
  const EventSpec& e = p.events[i];
  a->size = sizeof *a;
  a->type = e.type;
  a->config = e.config;
  a->config1 = e.config1;
  a->config2 = e.config2;
  // IBS on older kernels refuses every exclude_* bit (PERF_PMU_CAP_NO_EXCLUDE): the plan then
  // sets none and the decoder drops kernel ips.
  a->exclude_kernel = a->exclude_hv = p.exclude_kernel ? 1 : 0;
  if (e.role == Role::Leader) return;  // counts only; members carry the samples
  a->sample_period = period;
  a->sample_type = p.sample_type;
  a->precise_ip = e.precise_ip & 3;
  a->sample_id_all = 1;
  a->use_clockid = 1;
  a->clockid = CLOCK_MONOTONIC;
  a->watermark = 1;
  const long page = sysconf(_SC_PAGESIZE);
  a->wakeup_watermark = static_cast<uint32_t>(uint64_t(p.ring_pages) * (page > 0 ? page : 4096) / 4);
}

}  // namespace whymiss::pmu
