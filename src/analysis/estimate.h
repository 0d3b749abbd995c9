// From the raw facts of a sampling collector (soft, pmu) to the per-instruction / per-line /
// per-object records that analyze() reads, so that one analysis serves every mode.
//
// Units. Every estimated count is in samples: an instruction's accesses are its samples (soft:
// each stands for sample_period_ns of its thread's CPU time, so they measure where time went);
// its misses are samples x the modelled or sampled miss ratio. Counts are therefore comparable
// within a profile (shares, ordering, the analysis' ratio filters) but are not event counts.
//
// Soft mode (task-clock samples, breakpoint windows):
//  - Window replay: the captures of all windows whose [start, end] overlap form one cluster and
//    are replayed, merged in time order, through a fresh simulator (the profile's geometry, one
//    core per thread, LRU). Per instruction, the replay's outcome ratios per level (conflict,
//    capacity, coherence) times its samples are its misses. A line the replay sees first is a
//    compulsory miss of the replay, not of the program: its fate comes from reuse evidence.
//  - Reuse evidence: per (thread, object) the sampled positions of an instruction (offset in its
//    heap object; the address for other data). If the instruction sweeps forward (captures, or
//    else samples, step forward more often than back), every backward step shows the sweep came
//    back; the span it had covered since the previous backward step (bounded by the object's
//    size) is a lower bound of the reuse distance, and the largest such span D makes the lines a
//    window touched first capacity misses at every level smaller than D. Without that evidence
//    they count as hits and are never blamed.
//  - Only samples (no captures of the instruction): CachePerf's Algorithm 1 on the sampled
//    lines per level: when a share >= set_concentration of its samples fall in sets holding more
//    distinct sampled lines than ways while all its sampled lines fit in the level, that share
//    misses by conflict; otherwise a sweep with span D > size misses by capacity once per line
//    (ratio = operand size / line: unit stride assumed). Sparse samples undercount footprints, and
//    a conflict whose footprint exceeds the level (a large column walk) reads as capacity.
// PMU mode: misses per level are the samples whose data source lies beyond that level (sampled);
//  their kind split comes from the window replay when the instruction has captures (share of
//  conflict vs capacity per level), else from the rule above applied to its missing samples; a
//  miss with no evidence of either is compulsory.
// Sharing (both modes): a line sampled or captured by >= min_threads_for_sharing threads with a
//  write among them. Per thread read/write byte masks come from sample and capture addresses and
//  sizes; a coherence miss of thread t is true sharing when t's bytes overlap another thread's
//  written bytes (or t writes bytes another thread uses), else false sharing. Coherence misses
//  come from the window replay when captures of >= 2 threads touch the line; otherwise (soft)
//  from replaying the samples on shared lines in time order through a multi-core simulator: a
//  sample whose thread lost the line to another thread's sampled write since its own last sample
//  is a coherence miss (fine-grained interleaving between samples is assumed, as for threads
//  running at once); (pmu) every sample on the line that missed L1 is a coherence miss.
// Objects: an instruction's misses are split over the heap objects its samples fell in.
//
// Trace windows (soft mode, CaptureBackend::Trace; estimate_trace.cpp). When the profile holds
// at least 1,000 traced accesses, they alone decide every count, and the rules above are not
// used: every thread running when an epoch opened single-stepped itself for a window and
// recorded each access before it ran. Per epoch, the threads' windows are interleaved one access
// each in turn (as exact mode's relay interleaves threads running at once, whatever the real
// timing was: trace_summary() reports the overlap actually observed) and replayed twice through
// one simulator (geometry of the profile, a core per thread, LRU); only the second pass is
// counted, so a line the window touched first gets the fate it has in the window's steady state
// (its previous use one window earlier) rather than a compulsory miss. Accesses and misses are
// then counted in traced accesses, per instruction, line, object and level exactly as exact mode
// counts them, and analyze() applies the same rules and thresholds as to an exact profile.
// Mutex hand-overs: stepping slows a thread's own code ~1000x but not the kernel's wake-ups, so a
// contended pthread mutex changes hands far more often per acquisition in a window than in the
// program (the corpus's shared_mutex_t2: 99 % of acquisitions in its windows, 8-15 % outside them
// under soft mode's sampling). The soft runtime interposes the mutex calls and counts, natively and in windows,
// acquisitions and those whose previous holder was another thread (profile::LockInfoRecord);
// each traced access carries whether it ran inside a lock or unlock call or with a mutex held.
// A replayed L1 coherence miss is *lock-mediated* when its access ran under a mutex (in a lock or
// unlock call, or with one held) and the line's previous write by another thread ran under the
// same mutex (told apart by the lock word's line: see lock_mediated()): the line moved from one
// critical section to another of that lock, which it can only do when the lock changes hands.
// Those misses are counted with weight (native hand-over share) / (traced hand-over share), at
// most 1, each share smoothed as (hand-overs + 1) / (acquisitions + 2); a thinned miss counts as
// the hit it would have been. Every other miss, lock-free sharing and lines shared outside the
// lock included, counts whole. No weight without the counts (older profiles, runs without trace
// windows) or with fewer than kMinLockAcquisitions acquisitions on either side. The weight pools
// every mutex of the program; "native" is the runtime's accounting periods (~3 % of the run,
// never while a window steps) under soft mode's own sampling and hooks, which make a contended
// lock change hands more often than the bare program does (so the weight errs towards keeping
// misses). The traced share counts hand-overs between stepping threads only: an epoch that
// traced one contender sees none, which lowers the traced share and the correction with it
// (towards keeping misses too).
// Limits: a reuse longer than a window (in distinct lines) is seen as one window long, so
// capacity misses of levels larger than a window's footprint (L2, L3) are undercounted; windows
// are short (~20,000 instructions), so a phase of the program that no window fell in is missed.
// Single-threaded by contract.
#pragma once
#include <cstdint>
#include <string>

#include "analysis/analysis.h"
#include "model/profile.h"
#include "model/result.h"

namespace whymiss::analysis {

struct EstimateKnobs {
  uint32_t min_samples_per_instruction = 8;  // fewer: its capacity/conflict misses are not modelled
  double set_concentration = 0.5;  // share of samples in over-full sets that makes a conflict
  uint32_t min_threads_for_sharing = 2;
};

// Fills p.instructions, p.lines, p.objects' miss fields and p.counters from p.samples,
// p.windows and p.captures (replacing what was there). Exact-mode profiles are returned
// unchanged. Errors (one sentence) when the sampled data is inconsistent (captures out of time
// order within a thread, a capture naming a missing window, a data source level out of range,
// an invalid geometry).
Status estimate(profile::Profile& p, const EstimateKnobs& k = {});

// Whether estimate() decides the profile's counts from its trace windows (see above).
bool uses_traces(const profile::Profile& p);
// The trace windows of a profile at a glance, for the report.
struct TraceSummary {
  uint64_t epochs = 0, windows = 0, accesses = 0, steps = 0, threads = 0;
  // Of the time that windows replayed together (two or more) were traced, the share with two or
  // more threads stepping at once; -1 when no replay had two windows.
  double overlap = -1;
  // Epochs that traced one thread each and were replayed in pairs (two threads' epochs as if
  // they had run at once: the machine did not run the threads together while they were traced).
  uint64_t paired_epochs = 0;
  // Groups of two or more windows replayed together, and those of them where a thread waited in
  // the replay about as long as a system call it made took (trace times, a call in a window).
  uint64_t together_groups = 0, timed_groups = 0;
  // pthread mutex hand-overs per acquisition, natively and in the windows (counted by the
  // runtime's hooks), and the weight of lock-mediated coherence misses (above); -1 when not
  // measured or not applied (then every miss counts).
  double native_handover_share = -1, traced_handover_share = -1, lock_weight = -1;
  uint64_t native_acquisitions = 0, traced_acquisitions = 0;
  uint64_t native_handovers = 0, traced_handovers = 0;
  uint64_t untracked_acquisitions = 0;  // with no known previous holder (LockInfoRecord::untracked)
};
// Fewer acquisitions than this on either side: no weight (the shares are too uncertain).
inline constexpr uint64_t kMinLockAcquisitions = 32;
TraceSummary trace_summary(const profile::Profile& p);
// The trace path of estimate() (called by it when uses_traces(p)).
Status estimate_from_traces(profile::Profile& p, const EstimateKnobs& k);

// How many samples / windows / captures back a finding (samples and captures of its
// instructions, windows armed on them).
struct Support {
  uint64_t samples = 0, windows = 0, captures = 0;
  uint64_t traced = 0;  // traced accesses of its instructions (trace windows)
};
Support support(const profile::Profile& p, const Finding& f);

// How the finding's numbers were obtained, e.g. "accesses sampled; misses modelled by window
// replay". "counted" for exact profiles.
std::string provenance(const profile::Profile& p, const Finding& f);

}  // namespace whymiss::analysis
