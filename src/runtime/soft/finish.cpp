// The soft runtime's profile: written once, at exit (any thread) or from the stand-in handler of
// a fatal signal, after the sampling threads and the collector were quiesced (runtime.cpp).
// Uses only the private heap and write_profile_sections (no stdio, no program heap), since it
// may run in a dying process. The raw facts go out as recorded; analysis::estimate() turns
// them into instruction / line / object records at report time, so Counters are zeros here.
#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/common/decimal.h"
#include "runtime/common/heap.h"
#include "runtime/common/profile_strings.h"
#include "runtime/common/run_env.h"
#include "runtime/common/signal_guard.h"
#include "runtime/pmu/account.h"
#include "runtime/pmu/live.h"
#include "runtime/soft/decode.h"
#include "runtime/soft/runtime_internal.h"
#include "runtime/soft/trace.h"
#if WHYMISS_HAVE_CAPTURE
#include "runtime/soft/capture.h"
#endif

namespace whymiss::rt::softrt {
namespace {

// A note assembled without stdio.
class Text {
 public:
  Text& s(const char* x) {
    while (*x && n_ + 1 < sizeof buf_) buf_[n_++] = *x++;
    buf_[n_] = '\0';
    return *this;
  }
  Text& u(uint64_t v) {
    char d[20];
    const size_t k = put_decimal(d, v);
    for (size_t i = 0; i < k && n_ + 1 < sizeof buf_; ++i) buf_[n_++] = d[i];
    buf_[n_] = '\0';
    return *this;
  }
  const char* c_str() const { return buf_; }

 private:
  char buf_[kNoteLen] = {};
  size_t n_ = 0;
};

template <typename T>
T* alloc_array(size_t n) {
  return static_cast<T*>(private_alloc(sizeof(T) * (n ? n : 1)));
}

void end_notes(const profile::MetaRecord& meta) {
  uint32_t threads = std::min(g.next_index.load(), kMaxThreads);
  if (uint64_t f = g.open_failures.load(); f && (g.sampling || g.pmu_mode))
    add_note(1, Text().s("the sampling events of ").u(f).s(" of ").u(threads)
                    .s(" threads could not be opened (errno ").u(uint64_t(g.first_open_errno.load()))
                    .s("); those threads are not sampled").c_str());
  if (uint64_t u = g.unrecorded_threads.load())
    add_note(1, Text().s("").u(u).s(" threads were not tracked (thread table or private heap full)").c_str());
  if (sig::program_claimed(g.signo))
    add_note(1, Text().s("the program installed a handler for signal ").u(uint64_t(g.signo))
                    .s(", which whymiss uses for its events; signals sent to the program still reach "
                       "that handler, the events' signals stay whymiss's").c_str());
  if (meta.discarded[uint32_t(profile::DiscardReason::BufferFull)])
    add_note(1, Text().s("the sample store was full: ")
                    .u(meta.discarded[uint32_t(profile::DiscardReason::BufferFull)])
                    .s(" samples were dropped; use a longer --period-us").c_str());
  soft::DecodeStats d = soft::stats();
  if (d.cache_full)
    add_note(1, Text().s("the decoder's function cache was full for ").u(d.cache_full)
                    .s(" samples (counted as no_decode)").c_str());
#if WHYMISS_HAVE_CAPTURE
  if (g.capture_on) {
    soft::capture::Stats c = soft::capture::stats();
    add_note(c.open_failures ? 1 : 0,
             Text().s("capture stage: ").u(c.windows).s(" windows (").u(c.watch_windows)
                 .s(" on shared lines), ").u(c.captures).s(" captures, ").u(c.dropped)
                 .s(" traps dropped, ").u(c.rejected).s(" candidates outside mapped code, ")
                 .u(c.open_failures).s(" events refused (first errno ").u(uint64_t(c.first_errno))
                 .s(")").c_str());
    if (soft::capture::backend() == profile::CaptureBackend::Int3)
      add_note(c.sigtrap_blocked || c.sigtrap_taken ? 1 : 0,
               Text().s("int3 breakpoints (debug registers do not fire here): ").u(c.int3_passed)
                   .s(" hits stepped over unrecorded, ").u(c.int3_bounces).s(" bounces, ")
                   .u(c.int3_stale).s(" stale traps, ").u(c.sigtrap_blocked)
                   .s(" windows not armed because a thread blocked SIGTRAP")
                   .s(c.sigtrap_taken ? "; stopped: the program installed its own SIGTRAP handler" : "")
                   .c_str());
  }
#endif
  if (g.trace_on) {
    soft::trace::Stats t = soft::trace::stats();
    add_note(t.dropped ? 1 : 0,
             Text().s("trace windows: ").u(t.accesses).s(" accesses recorded, ")
                 .u(t.dropped).s(" dropped (store full); ").u(t.run_steps).s(" instructions run natively in ")
                 .u(t.run_traps).s(" stretches between breakpoints, ").u(t.single_steps)
                 .s(" single-stepped; ").u(t.stray_traps + t.breakpoint_strays)
                 .s(" stray traps; an instruction cost ~").u(t.step_cost_ns).s(" ns; ").u(t.spilled)
                 .s(" accesses kept in a temporary file until exit").c_str());
    if (t.spill_errno == EBADF && t.spilled)
      add_note(1, Text().s("the program closed whymiss's temporary trace file: the ").u(t.spilled)
                      .s(" traced accesses kept there are not in the profile").c_str());
    else if (t.spill_errno == EBADF)
      add_note(0, "the program closed whymiss's temporary trace file; the traced accesses stayed in memory");
    else if (t.spill_errno)
      add_note(0, Text().s("writing traced accesses to a temporary file failed (errno ").u(t.spill_errno)
                      .s("); the later ones stayed in memory").c_str());
  }
  if (g.pmu_mode && g.pmu_unknown_thread.load())
    add_note(0, Text().u(g.pmu_unknown_thread.load()).s(" pmu samples came from threads whymiss did not track").c_str());
}

}  // namespace

void write_profile(int term_signal) {
  profile::MetaRecord meta{};
  meta.mode = uint32_t(g.pmu_mode ? profile::Mode::Pmu : profile::Mode::Soft);
  meta.term_signal = term_signal;
  meta.pid = uint64_t(g.pid);
  meta.start_ns = g.start_ns;
  meta.end_ns = realtime_ns();
  meta.sample_period_ns = g.period_ns;
  meta.sample_source = uint32_t(g.sampling ? profile::SampleSource::TaskClock : profile::SampleSource::None);
  meta.capture_backend = uint32_t(profile::CaptureBackend::None);
#if WHYMISS_HAVE_CAPTURE
  if (g.capture_on) meta.capture_backend = uint32_t(soft::capture::backend());
#endif
  if (g.trace_on) meta.capture_backend = uint32_t(profile::CaptureBackend::Trace);
  meta.cores = 0;

  // Threads and the sample counts of their handlers.
  const uint32_t nthreads = std::min(g.next_index.load(), kMaxThreads);
  meta.threads_seen = nthreads;
  auto* threads = alloc_array<profile::ThreadRecord>(nthreads);
  size_t nthr = 0;
  for (uint32_t i = 0; i < nthreads; ++i) {
    ThreadState* t = g.threads[i].load(std::memory_order_acquire);
    if (!t) continue;
    meta.samples += t->taken;
    for (int r = 0; r < profile::kDiscardReasons; ++r) meta.discarded[r] += t->discarded[r];
    if (!threads) continue;
    profile::ThreadRecord& tr = threads[nthr++];
    tr = {};
    tr.index = t->index;
    tr.tid = uint32_t(t->tid);
    tr.core = t->index;
    tr.accesses = t->kept;
  }

  // pmu: the rings' last contents, then what the decoder counted.
  std::string pmu_note;
  if (g.pmu_mode) {
    g.pmu->close_all();
    meta.samples = 0;
    pmu::fill_meta(g.plan, g.pmu->decoder_totals(), &meta);
    pmu_note = pmu::describe(g.pmu->decoder_totals(), g.pmu->ring_totals());
    if (!pmu_note.empty()) add_note(0, pmu_note.c_str());
  }

#if WHYMISS_HAVE_CAPTURE
  if (g.capture_on) soft::capture::stop();
#endif
  if (g.trace_on) soft::trace::stop();
  // Full-trace windows: windows first (their access counts, and the snapshot of the store; before
  // the notes, which say what the snapshot found), then the accesses and their times, streamed
  // from the store and its spill file into the profile (a copy of them would double their
  // memory at exit).
  profile::TraceRecord* traces = nullptr;
  size_t ntr = 0, nta = 0;
  if (g.trace_on) {
    const size_t wc = soft::trace::window_count();
    traces = alloc_array<profile::TraceRecord>(wc);
    if (traces) ntr = soft::trace::export_windows(traces, wc);
    if (traces) nta = soft::trace::snapshot_accesses();  // accesses name windows: none without them
  }
  using Producer = bool (*)(const void*, profile::PutBytes, void*);
  Producer accesses = nullptr, times = nullptr;  // none when nothing is exported (0 bytes)
  if (nta) {
    accesses = [](const void*, profile::PutBytes put, void* ctx) { return soft::trace::write_accesses(put, ctx); };
    times = [](const void*, profile::PutBytes put, void* ctx) { return soft::trace::write_times(put, ctx); };
  }
  end_notes(meta);

  // Samples, sorted by time.
  const size_t nsamp_cap = g.store.count();
  auto* samples = alloc_array<profile::SampleRecord>(nsamp_cap);
  const size_t nsamp = samples ? g.store.export_sorted(samples, nsamp_cap) : 0;
  meta.accesses = nsamp;

  // Windows and captures of the capture stage.
  profile::WindowRecord* windows = nullptr;
  profile::CaptureRecord* captures = nullptr;
  size_t nwin = 0, ncap = 0;
#if WHYMISS_HAVE_CAPTURE
  if (g.capture_on) {
    size_t wc = soft::capture::window_count(), cc = soft::capture::capture_count();
    windows = alloc_array<profile::WindowRecord>(wc);
    captures = alloc_array<profile::CaptureRecord>(cc);
    if (windows) nwin = soft::capture::export_windows(windows, wc);
    if (captures) ncap = soft::capture::export_captures(captures, cc);
  }
#endif

  profile::LockInfoRecord locks{};
  const size_t nlocks = g.trace_on && soft::trace::export_locks(&locks) ? 1 : 0;

  // Strings: command, geometry source, module paths, notes.
  StringTable strings{alloc_array<char>(1 << 20), 0, 1 << 20};
  meta.command_str = strings.add(g.command);
  meta.geometry_source_str = strings.add(g.geometry_source);
  auto* modules = alloc_array<profile::ModuleRecord>(1024);
  const size_t nmod = list_modules(modules, 1024, strings);
  profile::NoteRecord notes[kMaxNotes];
  size_t nnotes = 0;
  const int nn = std::min(g.nnotes.load(), kMaxNotes);
  for (int i = 0; i < nn; ++i) {
    uint32_t off = strings.add(g.notes[i]);
    if (off != profile::kNoString) notes[nnotes++] = {off, g.note_severity[i]};
  }

  const size_t nobj_cap = object_count_with_misses();
  auto* objects = alloc_array<profile::ObjectRecord>(nobj_cap);
  const size_t nobj = objects ? export_objects(objects, nobj_cap) : 0;
  const size_t nsite_cap = site_count();
  auto* sites = alloc_array<profile::SiteRecord>(nsite_cap);
  const size_t nsites = sites ? export_sites(sites, nsite_cap) : 0;
  meta.dropped_records = dropped_objects();

  profile::CounterRecord counters[profile::kLevels] = {};  // filled by the estimator
  profile::SectionData s[] = {
      {profile::Section::Meta, sizeof meta, 1, &meta},
      {profile::Section::Levels, sizeof(profile::LevelRecord), g.nlevels, g.levels},
      {profile::Section::Counters, sizeof(profile::CounterRecord), g.nlevels, counters},
      {profile::Section::Strings, 1, strings.len, strings.data},
      {profile::Section::Modules, sizeof(profile::ModuleRecord), nmod, modules},
      {profile::Section::Threads, sizeof(profile::ThreadRecord), nthr, threads},
      {profile::Section::Samples, sizeof(profile::SampleRecord), nsamp, samples},
      {profile::Section::Windows, sizeof(profile::WindowRecord), nwin, windows},
      {profile::Section::Captures, sizeof(profile::CaptureRecord), ncap, captures},
      {profile::Section::Notes, sizeof(profile::NoteRecord), nnotes, notes},
      {profile::Section::Objects, sizeof(profile::ObjectRecord), nobj, objects},
      {profile::Section::Sites, sizeof(profile::SiteRecord), nsites, sites},
      {profile::Section::Traces, sizeof(profile::TraceRecord), ntr, traces},
      {profile::Section::TraceAccesses, sizeof(profile::TraceAccessRecord), nta, nullptr, accesses},
      {profile::Section::TraceTimes, sizeof(uint64_t), nta, nullptr, times},
      {profile::Section::Locks, sizeof(profile::LockInfoRecord), nlocks, &locks},
  };
  note_profile_written(profile::write_profile_sections(g.output, s, sizeof s / sizeof s[0]));
}

}  // namespace whymiss::rt::softrt
