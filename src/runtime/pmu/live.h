// The live pmu path, kept small: per-thread events with an mmap ring each, drained by one
// thread of the runtime (no signal per sample). Without a PMU it is tested for real in two
// ways (tests/unit/pmu_live_test.cpp): a plan the machine cannot serve fails cleanly, and the
// whole path runs on a software event (page faults) that fills the same sample format; what it
// calls (RingReader, Decoder) is also tested with synthetic PEBS and IBS rings.
//
// How the runtime wires it (libwhymiss-soft.so with WHYMISS_MODE=pmu):
//   init(parse_plan(getenv(kPlanEnv)), levels, max_threads, seed, sink) at runtime start; the
//   sink maps the kernel tid to the runtime's thread index and fills SampleRecord::object from
//   the object store, then appends to the runtime's sample table;
//   open_for_thread(gettid()) in the thread-start hook of every thread (the main thread too);
//   retire_thread(tid) in the thread-exit hook;
//   drain() from the runtime's collector thread every few milliseconds (or when poll() on
//   the fds reports the watermark), and close_all() at exit after that thread stopped;
//   forget_after_fork() in the child of a fork (the rings belong to the parent's threads);
//   at the end, account.h: fill_meta(plan, decoder_totals(), &meta) and describe() as a note.
// On any failure the thread is not sampled; the program runs on.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/pmu/plan.h"
#include "runtime/pmu/ring.h"
#include "runtime/pmu/sample.h"

namespace whymiss::pmu {

class LiveSampler {
 public:
  LiveSampler() = default;
  LiveSampler(const LiveSampler&) = delete;
  LiveSampler& operator=(const LiveSampler&) = delete;
  ~LiveSampler();

  // Validates the plan and maps the slot table (one mmap, no heap). `levels` is the profile
  // geometry's level count. Returns 0 or an errno value (EINVAL for a bad plan).
  int init(const Plan& plan, uint32_t levels, uint32_t max_threads, uint64_t seed,
           SampleSink sink);

  // Opens the plan's events on thread `tid` of this process and maps its ring. Callable from
  // any thread, concurrently with drain(). Returns 0 or an errno value (ENOSPC: no free slot;
  // otherwise perf_event_open's, mmap's or ioctl's).
  int open_for_thread(pid_t tid);
  // The thread ended: the next drain() empties its ring a last time and closes it.
  void retire_thread(pid_t tid);
  // Empties every ring into the sink. One caller at a time. Returns samples delivered.
  size_t drain();
  // drain(), then closes and unmaps everything and the slot table.
  void close_all();
  // In a forked child: closes the inherited descriptors and mappings without reading them.
  void forget_after_fork();

  // Sums over all rings, closed ones included. Only from the draining thread.
  DecoderCounters decoder_totals() const;
  RingCounters ring_totals() const;
  uint32_t threads_opened() const { return opened_.load(std::memory_order_relaxed); }

 private:
  struct Slot;
  void finish(Slot& s);  // merges its counters, unmaps, closes
  Plan plan_{};
  DecoderConfig dcfg_{};
  SampleSink sink_{};
  uint64_t seed_ = 0;
  Slot* slots_ = nullptr;
  uint32_t nslots_ = 0;
  size_t table_bytes_ = 0;
  uint8_t* scratch_ = nullptr;  // kMaxRecordBytes, in the same mapping
  DecoderCounters closed_dec_{};
  RingCounters closed_ring_{};
  std::atomic<uint32_t> opened_{0};
};

}  // namespace whymiss::pmu
