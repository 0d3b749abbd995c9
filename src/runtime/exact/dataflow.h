// Exact mode's data-centric trackers for `report --view flow` and `--view working-set`
// (profile::FlowRecord, profile::WorkingSetRecord; DProf's path traces and working sets).
//
// Flow: the runtime core calls flow::touch() for every L1 miss in a live heap object (compulsory
// ones too: an object's first write is usually one) and every write that upgraded a shared copy,
// holding that object's lock. The object remembers its last holder (HeapObject::flow_*); a
// touch by another thread is a handover, counted in one table of FlowRecords keyed by (site,
// from, from_kind, to, to_kind). The table is fixed at start (private heap, kFlowKeys keys);
// handovers of keys it has no room for are dropped and counted.
//
// Working set: every `period` L1 misses (counted by flow::miss()), at the next L1 miss, the
// simulator's tags are walked (Hierarchy::for_each_line) and each resident line counted for the
// allocation site of the heap object holding it, per level. At most kWsSamples samples are
// kept: when the table is full the period doubles and every other sample goes, so the samples
// stay evenly spread over the run. One more is taken at the end. Caches of more than kWsMaxWalk
// lines are counted in every k-th set only (estimated, WorkingSetInfoRecord::set_step). Walking the caches needs the
// simulator to be still: only taken while its accesses are serialised (one thread, or the relay).
//
// Both are on by default; WHYMISS_FLOW=0 and WHYMISS_WORKING_SET=0 turn them off.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/profile.h"
#include "runtime/common/heap.h"

namespace whymiss::sim { class Hierarchy; }

namespace whymiss::rt::flow {

inline constexpr uint32_t kFlowKeys = 1u << 16;
inline constexpr uint32_t kWsSamples = 64;   // kept during the run (+1 at the end)
inline constexpr uint32_t kWsGroups = 64;    // sites counted per sample
// Lines walked per cache and sample at most: a bigger cache is walked at every k-th set and its
// counts scaled by k (estimated). Walking a 32 MiB L3 in full at every sample cost ~20 % of
// exact mode's time on the capacity workload.
inline constexpr uint64_t kWsMaxWalk = 1u << 16;

// Reads the environment and reserves memory. `sim` is walked for working-set samples.
void start(const sim::Hierarchy* sim, unsigned line_shift);
bool flow_on() noexcept;
bool working_set_on() noexcept;

// A touch of heap object `o` by thread `thread` (an L1 miss when `miss`, else a write upgrading
// a shared copy). The caller holds o's lock (with_object) or serialises all heap activity;
// `serialised`: no other access reaches the simulator until this returns (the counts then need
// no locked adds).
void touch(HeapObject& o, uint32_t thread, bool write, bool miss, bool serialised) noexcept;

// One L1 miss of the program; takes a working-set sample when one is due. `serialised`: no
// other access reaches the simulator until this returns.
void miss(bool serialised) noexcept;
// Misses that threads simulating at once counted on their own (instead of miss(false) each,
// one locked add on a line every thread writes): added to the total at the end, before
// final_sample().
void add_misses(uint64_t n) noexcept;
// The last sample (at the end of recording, the simulator still). Never waits: skipped when a
// sample is in progress (the caller interrupted it).
void final_sample() noexcept;

// Records for the profile. Call once recording stopped; arrays from the caller (private heap).
size_t flow_count() noexcept;
size_t export_flows(profile::FlowRecord* out, size_t max) noexcept;
profile::FlowInfoRecord flow_info() noexcept;
size_t working_set_count() noexcept;
size_t export_working_set(profile::WorkingSetRecord* out, size_t max) noexcept;
profile::WorkingSetInfoRecord working_set_info() noexcept;

}  // namespace whymiss::rt::flow
