#include "runtime/pmu/detect.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/pmu/pfm_encode.h"

namespace whymiss::pmu {
namespace {

int real_open(perf_event_attr* a, pid_t pid, int cpu, int group, unsigned long flags) {
  long fd = syscall(SYS_perf_event_open, a, pid, cpu, group, flags);
  return fd < 0 ? -errno : static_cast<int>(fd);
}

bool read_text(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::getline(f, *out, '\0');
  while (!out->empty() && (out->back() == '\n' || out->back() == ' ')) out->pop_back();
  return true;
}

bool read_u64(const std::string& path, uint64_t* v) {
  std::string s;
  if (!read_text(path, &s) || s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(s.c_str(), &end, 0);
  if (errno || *end) return false;
  *v = static_cast<uint64_t>(n);
  return true;
}

void cpu_identity(std::string* vendor, uint32_t* family, uint32_t* model) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return;
  char v[13] = {};
  std::memcpy(v, &b, 4);
  std::memcpy(v + 4, &d, 4);
  std::memcpy(v + 8, &c, 4);
  *vendor = v;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  uint32_t fam = (a >> 8) & 0xf, mod = (a >> 4) & 0xf;
  if (fam == 0xf) fam += (a >> 20) & 0xff;
  if (fam == 0x6 || fam >= 0xf) mod |= ((a >> 16) & 0xf) << 4;
  *family = fam;
  *model = mod;
}

// Sets the bits of `value` into the config word a sysfs format file names
// ("config:0-7", "config1:0-15", "config:0-7,32-35", "config:23").
bool apply_format(const std::string& fmt, uint64_t value, EventSpec* e) {
  size_t colon = fmt.find(':');
  if (colon == std::string::npos) return false;
  std::string word = fmt.substr(0, colon);
  uint64_t* dst = word == "config" ? &e->config : word == "config1" ? &e->config1
                : word == "config2" ? &e->config2 : nullptr;
  if (!dst) return false;
  std::stringstream ranges(fmt.substr(colon + 1));
  std::string r;
  while (std::getline(ranges, r, ',')) {
    unsigned lo = 0, hi = 0;
    if (std::sscanf(r.c_str(), "%u-%u", &lo, &hi) != 2) {
      if (std::sscanf(r.c_str(), "%u", &lo) != 1) return false;
      hi = lo;
    }
    if (hi < lo || hi > 63) return false;
    for (unsigned b = lo; b <= hi; ++b, value >>= 1) *dst |= (value & 1) << b;
  }
  return true;
}

// Encodes a kernel-named event from sysfs: <pmu>/events/<name> ("event=0xcd,umask=0x1,ldlat=3")
// through <pmu>/format/<term>.
bool sysfs_event(const std::string& pmu, const std::string& name, EventSpec* e) {
  std::string text;
  if (!read_text(pmu + "/events/" + name, &text) || text.empty()) return false;
  std::stringstream terms(text);
  std::string t;
  while (std::getline(terms, t, ',')) {
    size_t eq = t.find('=');
    std::string key = t.substr(0, eq);
    uint64_t value = 1;
    if (eq != std::string::npos) value = std::strtoull(t.c_str() + eq + 1, nullptr, 0);
    std::string fmt;
    if (!read_text(pmu + "/format/" + key, &fmt) || !apply_format(fmt, value, e)) return false;
  }
  return true;
}

std::string perm_reason(int err, int paranoid, const char* what) {
  std::string s = std::string(what) + " is not permitted (" + std::strerror(err) + "): ";
  s += "perf_event_paranoid is " + std::to_string(paranoid) +
       "; hardware sampling needs it at 1 or below, or CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8)";
  return s;
}

// Opens the plan's events on this process as the runtime would, then closes them.
int probe_plan(const DetectEnv& env, const Plan& p) {
  int fds[kMaxEvents] = {-1, -1, -1, -1};
  int leader = -1, err = 0;
  for (uint32_t i = 0; i < p.event_count; ++i) {
    perf_event_attr a;
    fill_attr(p, static_cast<int>(i), thread_period(p, 0, 0), &a);
    a.disabled = 1;
    int fd = env.open_event(&a, 0, -1, leader, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) { err = -fd; break; }
    fds[i] = fd;
    if (p.events[i].role == Role::Leader) leader = fd;
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  return err;
}

Detection detect_ibs(const DetectEnv& env, Detection d) {
  d.backend = Backend::AmdIbs;
  uint64_t type = 0;
  const std::string dir = env.sysfs + "/ibs_op";
  if (!read_u64(dir + "/type", &type)) {
    d.backend = Backend::None;
    d.reason = "this AMD CPU has no ibs_op PMU in sysfs: IBS op sampling needs family 10h or "
               "later on bare metal (or a hypervisor that passes IBS through)";
    return d;
  }
  Plan& p = d.plan;
  p.backend = Backend::AmdIbs;
  p.event_count = 1;
  p.events[0].type = static_cast<uint32_t>(type);
  std::string fmt;
  // cnt_ctl=1 counts dispatched ops rather than cycles: samples proportional to work.
  if (read_text(dir + "/format/cnt_ctl", &fmt)) apply_format(fmt, 1, &p.events[0]);
  p.events[0].role = Role::Ops;
  p.sample_type = kIbsSampleType;
  p.period = env.period ? env.period : 0x40000;
  int err = probe_plan(env, p);
  if (err == EINVAL) {  // older kernels reject exclude_* on IBS
    p.exclude_kernel = false;
    err = probe_plan(env, p);
  }
  if (err == EACCES || err == EPERM) {
    d.reason = perm_reason(err, d.paranoid, "opening the ibs_op PMU");
  } else if (err) {
    d.reason = std::string("the ibs_op PMU exists but cannot be opened (") + std::strerror(err) + ")";
  } else {
    d.available = true;
    d.reason = "AMD IBS op sampling is available (ibs_op PMU type " + std::to_string(type) + ")";
  }
  return d;
}

bool encode_intel(const DetectEnv& env, const std::string& pmu, const char* const* names,
                  const char* sysfs_name, EventSpec* e, std::string* why) {
  for (const char* const* n = names; *n; ++n) {
    uint32_t type;
    uint64_t c = 0, c1 = 0;
    if (env.encode(*n, &type, &c, &c1, why)) {
      e->config = c;
      e->config1 = c1;
      return true;
    }
  }
  return sysfs_event(pmu, sysfs_name, e);
}

Detection detect_pebs(const DetectEnv& env, Detection d) {
  d.backend = Backend::IntelPebs;
  // Hybrid parts (Alder Lake and later) name the performance cores' PMU cpu_core.
  std::string pmu = env.sysfs + "/cpu_core";
  uint64_t type = 0;
  if (!read_u64(pmu + "/type", &type)) {
    pmu = env.sysfs + "/cpu";
    if (!read_u64(pmu + "/type", &type)) type = PERF_TYPE_RAW;
  }
  Plan& p = d.plan;
  p.backend = Backend::IntelPebs;
  p.sample_type = kPebsSampleType;
  p.period = env.period ? env.period : 10007;  // prime: no lockstep with power-of-two loops
  std::string why;
  const std::string ldlat = "MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=" + std::to_string(env.ldlat);
  const char* loads[] = {ldlat.c_str(), nullptr};
  const char* stores[] = {"MEM_INST_RETIRED:ALL_STORES", "MEM_UOPS_RETIRED:ALL_STORES",
                          "MEM_TRANS_RETIRED:PRECISE_STORE", nullptr};
  EventSpec aux, ld, st;
  if (sysfs_event(pmu, "mem-loads-aux", &aux)) {  // Sapphire Rapids, hybrid P-cores
    aux.role = Role::Leader;
    p.events[p.event_count++] = aux;
  }
  if (!encode_intel(env, pmu, loads, "mem-loads", &ld, &why)) {
    d.backend = Backend::None;
    d.reason = "no PEBS load-latency event is known for this Intel CPU (" +
               (why.empty() ? std::string("neither libpfm4 nor the kernel name one") : why) +
               "); it needs Nehalem or later on bare metal";
    return d;
  }
  ld.config1 = env.ldlat;  // config1 holds only the latency threshold (libpfm4 and sysfs agree)
  ld.role = Role::Loads;
  p.events[p.event_count++] = ld;
  const bool have_stores = encode_intel(env, pmu, stores, "mem-stores", &st, &why);
  if (have_stores) {
    st.role = Role::Stores;
    p.events[p.event_count++] = st;
  }
  int err = 0;
  for (uint8_t precise : {uint8_t(2), uint8_t(1)}) {
    for (uint32_t i = 0; i < p.event_count; ++i)
      if (p.events[i].role != Role::Leader) p.events[i].precise_ip = precise;
    for (uint32_t i = 0; i < p.event_count; ++i) p.events[i].type = static_cast<uint32_t>(type);
    err = probe_plan(env, p);
    if (err != EOPNOTSUPP && err != EINVAL) break;
  }
  if (err == EACCES || err == EPERM) {
    d.reason = perm_reason(err, d.paranoid, "opening PEBS load-latency sampling");
  } else if (err) {
    d.reason = std::string("PEBS load-latency sampling cannot be opened (") + std::strerror(err) + ")";
  } else {
    d.available = true;
    d.reason = std::string("Intel PEBS load-latency") + (have_stores ? " and precise-store" : "") +
               " sampling is available";
  }
  return d;
}

}  // namespace

Detection detect(const DetectEnv& in) {
  DetectEnv env = in;
  if (!env.open_event) env.open_event = real_open;
  if (!env.encode) env.encode = pfm_encode;
  if (env.vendor.empty()) cpu_identity(&env.vendor, &env.family, &env.model);
  Detection d;
  uint64_t par;
  if (read_u64(env.paranoid_path, &par)) d.paranoid = static_cast<int>(par);
  const bool amd = env.vendor == "AuthenticAMD" || env.vendor == "HygonGenuine";
  const bool intel = env.vendor == "GenuineIntel";
  if (!amd && !intel) {
    d.reason = "pmu mode supports Intel and AMD x86-64 CPUs, and this CPU reports vendor '" +
               env.vendor + "'";
    return d;
  }
  // A hardware counter at all? Virtual machines without a virtual PMU fail here.
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_HARDWARE;
  a.config = PERF_COUNT_HW_CPU_CYCLES;
  a.disabled = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  int fd = env.open_event(&a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    const int err = -fd;
    if (err == ENOENT || err == EOPNOTSUPP || err == ENODEV || err == ENOSYS)
      d.reason = std::string("no hardware PMU: the kernel cannot open the CPU cycles counter (") +
                 std::strerror(err) + "), as in virtual machines without a virtual PMU";
    else if (err == EACCES || err == EPERM)
      d.reason = perm_reason(err, d.paranoid, "opening hardware counters");
    else
      d.reason = std::string("the CPU cycles counter cannot be opened (") + std::strerror(err) + ")";
    return d;
  }
  close(fd);
  d = amd ? detect_ibs(env, d) : detect_pebs(env, d);
  d.plan.family = env.family;
  d.plan.model = env.model;
  if (d.available && !validate(d.plan).ok()) {
    d.available = false;
    d.reason = "the detected pmu plan is inconsistent: " + validate(d.plan).error();
  }
  return d;
}

}  // namespace whymiss::pmu
