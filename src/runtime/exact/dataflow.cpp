#include "runtime/exact/dataflow.h"

#include <time.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "runtime/common/spinlock.h"
#include "runtime/exact/count_up.h"
#include "sim/sim.h"

namespace whymiss::rt::flow {
namespace {

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "0") == 0;
}

// ---- flow ----
constexpr uint32_t kFlowLimit = kFlowKeys / 8 * 7;  // keys taken before new ones are dropped
bool g_flow_on = false;
profile::FlowRecord* g_flows = nullptr;  // kFlowKeys slots; to_kind == 0: free
SpinLock g_flow_lock;
uint32_t g_flow_used = 0;
std::atomic<uint64_t> g_dropped_handovers{0}, g_dropped_misses{0}, g_objects{0};

uint32_t flow_slot(uint32_t site, uint32_t from, uint8_t fk, uint32_t to, uint8_t tk) {
  uint64_t h = (uint64_t(site) << 32 | from) * 0x9E3779B97F4A7C15ull;
  h ^= (uint64_t(to) << 8 | uint64_t(fk) << 4 | tk) * 0xD6E8FEB86659FD93ull;
  return uint32_t(h >> 48) & (kFlowKeys - 1);
}

// The slot of the key, inserted if new; -1 when the table has no room for it.
int64_t flow_find(uint32_t site, uint32_t from, uint8_t fk, uint32_t to, uint8_t tk,
                  const HeapObject& o) {
  LockGuard lock(g_flow_lock);
  for (uint32_t i = flow_slot(site, from, fk, to, tk);; i = (i + 1) & (kFlowKeys - 1)) {
    profile::FlowRecord& r = g_flows[i];
    if (r.to_kind == 0) {
      if (g_flow_used >= kFlowLimit) return -1;
      ++g_flow_used;
      r.site = site;
      r.from = from;
      r.to = to;
      r.from_kind = fk;
      r.example_serial = o.serial;
      r.example_start = o.start;
      r.example_size = o.size;
      r.example_alloc_thread = o.alloc_thread;
      __atomic_store_n(&r.to_kind, tk, __ATOMIC_RELEASE);
      return i;
    }
    if (r.site == site && r.from == from && r.from_kind == fk && r.to == to && r.to_kind == tk) return i;
  }
}

// ---- working set ----
bool g_ws_on = false;
const sim::Hierarchy* g_sim = nullptr;
unsigned g_line_shift = 6;
size_t g_nlevels = 0;
struct Group {
  uint32_t site;
  uint64_t serial, start, size;
  uint64_t lines[profile::kLevels];
};
struct Sample {
  uint64_t time_ns, l1_misses;
  uint32_t ngroups;
  Group groups[kWsGroups];
};
Sample* g_samples = nullptr;  // kWsSamples + 1 (the last: the end of the run)
uint32_t g_nsamples = 0;
bool g_final_taken = false;
uint64_t g_period = 4096;  // L1 misses between samples
std::atomic<uint64_t> g_misses{0};
std::atomic<uint64_t> g_next_due{4096};
uint64_t g_start_ns = 0;
uint64_t g_ws_dropped = 0;
SpinLock g_ws_lock;
uint64_t g_step[profile::kLevels] = {1, 1, 1, 1};  // Hierarchy::walk_step per level

// The walk's memory of where lines were: per 4 KiB page, the object last found in it (or none).
struct PageMemo {
  uint64_t page_plus_one;
  uint64_t start, end;  // the object [start, end); empty when the page holds no object
  uint32_t group;       // index in the sample, or kWsGroups (dropped)
};
constexpr uint32_t kPageMemos = 1024;
PageMemo* g_page_memo = nullptr;
bool g_walk_no_objects = false;  // take_sample: no object was findable when the walk began

struct Walk {
  Sample* s;
};

struct Found {
  uint64_t serial, start, size;
  uint32_t site;
};
void found_object(HeapObject& o, void* arg) {
  auto* f = static_cast<Found*>(arg);
  f->serial = o.serial;
  f->start = o.start;
  f->size = o.size;
  f->site = o.site;
}

uint32_t group_of(Sample& s, uint32_t site, const Found& f) {
  for (uint32_t g = 0; g < s.ngroups; ++g)
    if (s.groups[g].site == site) return g;
  if (s.ngroups == kWsGroups) return kWsGroups;
  Group& g = s.groups[s.ngroups];
  std::memset(&g, 0, sizeof g);
  g.site = site;
  g.serial = f.serial;
  g.start = f.start;
  g.size = f.size;
  return s.ngroups++;
}

void count_line(size_t level, uint32_t, uint64_t line, void* arg) {
  auto* w = static_cast<Walk*>(arg);
  const uint64_t addr = line << g_line_shift;
  const uint64_t page = addr >> 12;
  PageMemo& m = g_page_memo[(page * 0x9E3779B97F4A7C15ull) >> (64 - 10)];
  uint32_t group;
  if (m.page_plus_one == page + 1 && (m.start == m.end || (addr >= m.start && addr < m.end))) {
    group = m.group;
  } else {
    Found f{};
    // The object at the line's start, else one that starts inside the line (a malloc block
    // usually starts 16 bytes past a line boundary).
    const uint64_t last = addr + (uint64_t(1) << g_line_shift) - 1;
    if (with_object(addr, found_object, &f) ||
        (!page_without_objects(addr) && with_object(last, found_object, &f))) {
      group = group_of(*w->s, f.site, f);
      m = PageMemo{page + 1, f.start, f.start + f.size, group};
    } else {
      group = group_of(*w->s, profile::kWsNotHeap, f);
      // Remembered only for a page that holds no object at all (else a neighbour's lines would
      // be taken for non-heap ones).
      if (g_walk_no_objects || page_without_objects(addr)) m = PageMemo{page + 1, 0, 0, group};
    }
  }
  if (group == kWsGroups) {
    ++g_ws_dropped;
    return;
  }
  if (level < profile::kLevels) w->s->groups[group].lines[level] += g_step[level];
}

void take_sample(Sample& s, uint64_t misses) {
  s.time_ns = mono_ns() - g_start_ns;
  s.l1_misses = misses;
  s.ngroups = 0;
  std::memset(g_page_memo, 0, sizeof(PageMemo) * kPageMemos);
  // Before any object was made findable the store cannot vouch for a page (page_without_objects
  // says no), yet no page holds one: remembered per page all the same, as for the pages it
  // vouches for (else each walked line asked the store twice, a program that never allocates
  // paying on every sample).
  g_walk_no_objects = object_attaches() == 0;
  Walk w{&s};
  g_sim->for_each_line(count_line, &w, kWsMaxWalk);
}

}  // namespace

void start(const sim::Hierarchy* sim, unsigned line_shift) {
  g_sim = sim;
  g_line_shift = line_shift;
  g_nlevels = sim->geometry().levels.size();
  uint64_t walk_lines = 0;  // lines a walk visits (one core's private levels and the shared one)
  for (size_t l = 0; l < g_nlevels && l < size_t(profile::kLevels); ++l) {
    const LevelGeometry& lg = sim->geometry().levels[l];
    g_step[l] = sim::Hierarchy::walk_step(lg, kWsMaxWalk);
    walk_lines += lg.sets() / g_step[l] * lg.ways;
  }
  // A walk visits each of its lines (~13 ns a line here, looking up its object): the first
  // period is at least a quarter of its lines in L1 misses (4,096 or more), so walks cost at
  // most ~4 visits per miss, and fewer once the period doubles. (An eighth cost 12 % of exact
  // mode's CPU time on the capacity workload, 1.3 M L1 misses in 0.3 s.)
  g_period = walk_lines / 4 > 4096 ? walk_lines / 4 : 4096;
  g_next_due.store(g_period, std::memory_order_relaxed);
  g_start_ns = mono_ns();
  if (!env_off("WHYMISS_FLOW")) {
    g_flows = static_cast<profile::FlowRecord*>(private_alloc(sizeof(profile::FlowRecord) * kFlowKeys));
    if (g_flows) std::memset(g_flows, 0, sizeof(profile::FlowRecord) * kFlowKeys);
    g_flow_on = g_flows != nullptr;
  }
  if (!env_off("WHYMISS_WORKING_SET")) {
    g_samples = static_cast<Sample*>(private_alloc(sizeof(Sample) * (kWsSamples + 1)));
    g_page_memo = static_cast<PageMemo*>(private_alloc(sizeof(PageMemo) * kPageMemos));
    g_ws_on = g_samples != nullptr && g_page_memo != nullptr;
  }
}

bool flow_on() noexcept { return g_flow_on; }
bool working_set_on() noexcept { return g_ws_on; }

void touch(HeapObject& o, uint32_t thread, bool write, bool miss, bool serialised) noexcept {
  if (!g_flow_on) return;
  const uint32_t last = o.flow_last;
  if (last != 0 && (last & ~kFlowWriteBit) == thread + 1) {  // the holder again
    if (miss) {
      // (The common case, once per L1 miss in an object: a plain add when nothing else can
      // reach the edge meanwhile, a locked one otherwise.)
      if (o.flow_edge && serialised) g_flows[o.flow_edge - 1].misses++;
      else if (o.flow_edge) __atomic_fetch_add(&g_flows[o.flow_edge - 1].misses, 1, __ATOMIC_RELAXED);
      else g_dropped_misses.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  if (last == 0) g_objects.fetch_add(1, std::memory_order_relaxed);
  const uint32_t from = last ? (last & ~kFlowWriteBit) - 1 : o.alloc_thread;
  const uint8_t fk = last == 0 ? profile::kFlowAlloc
                               : (last & kFlowWriteBit) ? profile::kFlowWrite : profile::kFlowRead;
  const uint8_t tk = write ? profile::kFlowWrite : profile::kFlowRead;
  const int64_t i = flow_find(o.site, from, fk, thread, tk, o);
  if (i < 0) {
    g_dropped_handovers.fetch_add(1, std::memory_order_relaxed);
    if (miss) g_dropped_misses.fetch_add(1, std::memory_order_relaxed);
    o.flow_edge = 0;
  } else {
    __atomic_fetch_add(&g_flows[i].handovers, 1, __ATOMIC_RELAXED);
    if (miss) __atomic_fetch_add(&g_flows[i].misses, 1, __ATOMIC_RELAXED);
    o.flow_edge = uint32_t(i) + 1;
  }
  o.flow_last = (thread + 1) | (write ? kFlowWriteBit : 0);
}

void miss(bool serialised) noexcept {
  if (!g_ws_on) return;
  const uint64_t n = count_up(g_misses, serialised);
  if (n < g_next_due.load(std::memory_order_relaxed) || !serialised) return;
  LockGuard lock(g_ws_lock);
  if (g_final_taken) return;
  if (g_nsamples == kWsSamples) {  // full: keep every other sample, at twice the period
    for (uint32_t i = 1; i < kWsSamples; i += 2) g_samples[i / 2] = g_samples[i];
    g_nsamples = kWsSamples / 2;
    g_period *= 2;
  }
  take_sample(g_samples[g_nsamples++], n);
  g_next_due.store((g_nsamples + 1) * g_period, std::memory_order_relaxed);
}

void add_misses(uint64_t n) noexcept {
  if (g_ws_on && n) g_misses.fetch_add(n, std::memory_order_relaxed);
}

void final_sample() noexcept {
  if (!g_ws_on) return;
  // Never wait: the caller may be a signal handler that interrupted this very thread inside a
  // sample (holding the lock), or a thread racing a relay that did not stop.
  if (!g_ws_lock.try_lock()) return;
  if (!g_final_taken) {
    g_final_taken = true;
    take_sample(g_samples[g_nsamples++], g_misses.load(std::memory_order_relaxed));
  }
  g_ws_lock.unlock();
}

size_t flow_count() noexcept { return g_flow_on ? g_flow_used : 0; }

size_t export_flows(profile::FlowRecord* out, size_t max) noexcept {
  if (!g_flow_on) return 0;
  size_t n = 0;
  for (uint32_t i = 0; i < kFlowKeys && n < max; ++i)
    if (__atomic_load_n(&g_flows[i].to_kind, __ATOMIC_ACQUIRE) != 0) out[n++] = g_flows[i];
  return n;
}

profile::FlowInfoRecord flow_info() noexcept {
  profile::FlowInfoRecord r{};
  r.capacity = kFlowLimit;
  r.dropped_handovers = g_dropped_handovers.load();
  r.dropped_misses = g_dropped_misses.load();
  r.objects = g_objects.load();
  return r;
}

size_t working_set_count() noexcept {
  if (!g_ws_on) return 0;
  size_t n = 0;
  for (uint32_t i = 0; i < g_nsamples; ++i) n += size_t(g_samples[i].ngroups) * g_nlevels;
  return n;
}

size_t export_working_set(profile::WorkingSetRecord* out, size_t max) noexcept {
  if (!g_ws_on) return 0;
  size_t n = 0;
  for (uint32_t i = 0; i < g_nsamples; ++i) {
    const Sample& s = g_samples[i];
    for (uint32_t gi = 0; gi < s.ngroups; ++gi)
      for (size_t l = 0; l < g_nlevels && l < size_t(profile::kLevels); ++l) {
        if (n == max) return n;
        const Group& g = s.groups[gi];
        profile::WorkingSetRecord& r = out[n++];
        std::memset(&r, 0, sizeof r);
        r.sample = i;
        r.level = uint32_t(l);
        r.site = g.site;
        r.time_ns = s.time_ns;
        r.l1_misses = s.l1_misses;
        r.lines = g.lines[l];
        r.example_serial = g.serial;
        r.example_start = g.start;
        r.example_size = g.size;
      }
  }
  return n;
}

profile::WorkingSetInfoRecord working_set_info() noexcept {
  profile::WorkingSetInfoRecord r{};
  r.period = g_period;
  r.samples = g_nsamples;
  r.max_groups = kWsGroups;
  r.dropped_lines = g_ws_dropped;
  for (int l = 0; l < profile::kLevels; ++l) r.set_step[l] = uint32_t(g_step[l]);
  return r;
}

}  // namespace whymiss::rt::flow
