#include "runtime/pmu/live.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <new>

namespace whymiss::pmu {

namespace {
enum : uint32_t { kFree = 0, kOpening = 1, kLive = 2, kRetiring = 3 };

void add(DecoderCounters& t, const DecoderCounters& d) {
  t.samples += d.samples; t.kept += d.kept; t.malformed += d.malformed;
  t.no_address += d.no_address; t.no_ip += d.no_ip; t.kernel += d.kernel;
  t.not_memory += d.not_memory; t.period_sum += d.period_sum; t.lost += d.lost;
  t.lost_samples += d.lost_samples; t.throttles += d.throttles;
  t.unthrottles += d.unthrottles; t.throttled_ns += d.throttled_ns; t.other += d.other;
}
void add(RingCounters& t, const RingCounters& r) {
  t.records += r.records; t.bytes += r.bytes; t.wrapped += r.wrapped;
  t.corrupt += r.corrupt; t.partial += r.partial;
}

long perf_open(perf_event_attr* a, pid_t tid, int group_fd) {
  return syscall(SYS_perf_event_open, a, tid, -1, group_fd, PERF_FLAG_FD_CLOEXEC);
}
size_t page_size() {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<size_t>(p) : 4096;
}
}  // namespace

struct LiveSampler::Slot {
  std::atomic<uint32_t> state{kFree};
  std::atomic<pid_t> tid{0};  // read by retire_thread() while another thread opens the slot
  int fds[kMaxEvents] = {-1, -1, -1, -1};
  uint8_t* map = nullptr;
  size_t map_bytes = 0;
  RingReader ring;
  Decoder dec;
};

LiveSampler::~LiveSampler() { close_all(); }

int LiveSampler::init(const Plan& plan, uint32_t levels, uint32_t max_threads, uint64_t seed,
                      SampleSink sink) {
  if (slots_ || !validate(plan).ok() || max_threads == 0 || max_threads > 65536) return EINVAL;
  plan_ = plan;
  seed_ = seed;
  sink_ = sink;
  dcfg_ = DecoderConfig{};
  dcfg_.source = plan.backend == Backend::AmdIbs ? profile::SampleSource::Ibs
                                                 : profile::SampleSource::Pebs;
  dcfg_.sample_type = plan.sample_type;
  dcfg_.levels = levels;
  dcfg_.family = plan.family;
  dcfg_.model = plan.model;
  if (!Decoder::make(dcfg_, sink_).ok()) return EINVAL;
  const size_t bytes = sizeof(Slot) * max_threads + kMaxRecordBytes + 1;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return errno;
  slots_ = static_cast<Slot*>(m);
  for (uint32_t i = 0; i < max_threads; ++i) new (&slots_[i]) Slot();
  nslots_ = max_threads;
  table_bytes_ = bytes;
  scratch_ = static_cast<uint8_t*>(m) + sizeof(Slot) * max_threads;
  return 0;
}

int LiveSampler::open_for_thread(pid_t tid) {
  if (!slots_) return EINVAL;
  Slot* s = nullptr;
  for (uint32_t i = 0; i < nslots_ && !s; ++i) {
    uint32_t expect = kFree;
    if (slots_[i].state.compare_exchange_strong(expect, kOpening, std::memory_order_acquire))
      s = &slots_[i];
  }
  if (!s) return ENOSPC;
  s->tid.store(tid, std::memory_order_relaxed);
  const uint64_t period = thread_period(plan_, static_cast<uint32_t>(tid), seed_);
  DecoderConfig cfg = dcfg_;
  int err = 0, leader = -1, output = -1;
  const size_t page = page_size();
  for (uint32_t i = 0; i < plan_.event_count && !err; ++i) {
    perf_event_attr a;
    fill_attr(plan_, static_cast<int>(i), period, &a);
    long fd = perf_open(&a, tid, leader);
    if (fd < 0) { err = errno; break; }
    s->fds[i] = static_cast<int>(fd);
    const Role role = plan_.events[i].role;
    if (role == Role::Leader) { leader = s->fds[i]; continue; }
    if (output < 0) {  // the first sampling event owns the ring
      s->map_bytes = page * (1 + plan_.ring_pages);
      void* m = mmap(nullptr, s->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fds[i], 0);
      if (m == MAP_FAILED) { err = errno; s->map_bytes = 0; break; }
      s->map = static_cast<uint8_t*>(m);
      output = s->fds[i];
    } else if (ioctl(s->fds[i], PERF_EVENT_IOC_SET_OUTPUT, output) != 0) {
      err = errno;
      break;
    }
    if (role == Role::Stores) {
      uint64_t id = 0;
      if (ioctl(s->fds[i], PERF_EVENT_IOC_ID, &id) != 0) { err = errno; break; }
      if (cfg.store_id_count < 4) cfg.store_ids[cfg.store_id_count++] = id;
    }
  }
  if (!err && !s->ring.attach(s->map, s->map_bytes, page)) err = EIO;
  if (!err) {
    auto d = Decoder::make(cfg, sink_);
    if (d.ok()) s->dec = d.value();
    else err = EINVAL;
  }
  if (err) {
    finish(*s);
    s->state.store(kFree, std::memory_order_release);
    return err;
  }
  opened_.fetch_add(1, std::memory_order_relaxed);
  s->state.store(kLive, std::memory_order_release);
  return 0;
}

void LiveSampler::retire_thread(pid_t tid) {
  for (uint32_t i = 0; i < nslots_; ++i) {
    Slot& s = slots_[i];
    uint32_t expect = kLive;
    if (s.tid.load(std::memory_order_relaxed) == tid &&
        s.state.compare_exchange_strong(expect, kRetiring))
      return;
  }
}

void LiveSampler::finish(Slot& s) {
  add(closed_dec_, s.dec.counters());
  add(closed_ring_, s.ring.counters());
  if (s.map) munmap(s.map, s.map_bytes);
  for (int& fd : s.fds) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  s.map = nullptr;
  s.map_bytes = 0;
  s.ring = RingReader();
  s.dec = Decoder();
}

size_t LiveSampler::drain() {
  size_t n = 0;
  for (uint32_t i = 0; i < nslots_; ++i) {
    Slot& s = slots_[i];
    const uint32_t st = s.state.load(std::memory_order_acquire);
    if (st == kLive) {
      n += s.ring.drain(Decoder::record_fn, &s.dec, scratch_);
    } else if (st == kRetiring) {
      n += s.ring.drain(Decoder::record_fn, &s.dec, scratch_);
      finish(s);
      s.state.store(kFree, std::memory_order_release);
    }
  }
  return n;
}

void LiveSampler::close_all() {
  if (!slots_) return;
  for (uint32_t i = 0; i < nslots_; ++i) {
    Slot& s = slots_[i];
    uint32_t st = s.state.load(std::memory_order_acquire);
    if (st == kLive || st == kRetiring) {
      if (s.ring.attached()) s.ring.drain(Decoder::record_fn, &s.dec, scratch_);
      finish(s);
    }
    s.~Slot();
  }
  munmap(slots_, table_bytes_);
  slots_ = nullptr;
  nslots_ = 0;
}

void LiveSampler::forget_after_fork() {
  if (!slots_) return;
  for (uint32_t i = 0; i < nslots_; ++i) {
    Slot& s = slots_[i];
    if (s.state.load(std::memory_order_acquire) != kFree) finish(s);
    s.state.store(kFree, std::memory_order_release);
  }
  closed_dec_ = DecoderCounters{};
  closed_ring_ = RingCounters{};
  opened_.store(0, std::memory_order_relaxed);
}

DecoderCounters LiveSampler::decoder_totals() const {
  DecoderCounters t = closed_dec_;
  for (uint32_t i = 0; i < nslots_; ++i)
    if (slots_[i].state.load(std::memory_order_acquire) == kLive) add(t, slots_[i].dec.counters());
  return t;
}

RingCounters LiveSampler::ring_totals() const {
  RingCounters t = closed_ring_;
  for (uint32_t i = 0; i < nslots_; ++i)
    if (slots_[i].state.load(std::memory_order_acquire) == kLive) add(t, slots_[i].ring.counters());
  return t;
}

}  // namespace whymiss::pmu
