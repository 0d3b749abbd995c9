// The profile file: what a collector (exact, soft, pmu) records and the analysis reads.
//
// Layout: FileHeader, then `section_count` SectionHeaders, then the sections' bytes. Every
// record is a fixed-size POD struct declared here; sizes are static_asserted so the format
// cannot drift silently. The header carries the file size and a checksum of all bytes after the
// header (format 2: checksum() below; format 1, still read: FNV-1a 64); a reader rejects a file
// whose magic, version, size, checksum or section table does not hold. Writers write to a
// temporary file and rename it into place. Integers are little-endian (x86-64 only). Strings live in the Strings section, referenced by
// byte offset; each is NUL-terminated.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/geometry.h"
#include "model/result.h"

namespace whymiss::profile {

inline constexpr char kMagic[8] = {'W', 'H', 'Y', 'M', 'I', 'S', 'S', '\x1a'};
// Format 2 differs from 1 only in the checksum (word-wise instead of FNV-1a's byte-wise, ~25x
// faster over exact mode's access log); both are read, 2 is written.
inline constexpr uint32_t kVersion = 2;
inline constexpr uint32_t kOldestVersion = 1;
inline constexpr int kKinds = 6;      // sim::Outcome: hit, compulsory, capacity, conflict, TS, FS
inline constexpr int kLevels = 4;     // kMaxLevels
inline constexpr int kLineThreads = 8;   // threads remembered per shared line
inline constexpr int kRefs = 4;          // objects / instructions / addresses remembered per record
inline constexpr uint32_t kNoString = 0xFFFFFFFFu;
inline constexpr uint32_t kNoSite = 0xFFFFFFFFu;

enum class Mode : uint32_t { Exact = 1, Soft = 2, Pmu = 3 };

// ---- sampling collectors (soft, pmu) ----
enum class SampleSource : uint32_t { None = 0, TaskClock = 1, Pebs = 2, Ibs = 3 };
// How captured address streams of hot instructions were obtained.
enum class CaptureBackend : uint32_t {
  None = 0,       // no capture stage (disabled or unavailable: see Notes)
  HwBreakpoint = 1,  // perf PERF_TYPE_BREAKPOINT / HW_BREAKPOINT_X
  Int3 = 2,       // software breakpoint (int3 patched into the code) + single step
  Trace = 3,      // full-trace windows: every thread single-steps itself (Traces section)
};
// Why a sample was dropped (MetaRecord::discarded index).
enum class DiscardReason : uint32_t {
  NotMemory = 0,     // the attributed instruction does not access memory
  Clobbered = 1,     // it overwrote a register its address needs
  NoDecode = 2,      // no known instruction boundary / undecodable bytes
  InRuntime = 3,     // the thread was inside whymiss's runtime
  BufferFull = 4,    // the thread's sample buffer was full
};
inline constexpr int kDiscardReasons = 5;
inline constexpr uint8_t kLevelUnknown = 0xFF;
// SampleRecord / CaptureRecord flags.
inline constexpr uint8_t kAccessRead = 1, kAccessWrite = 2;
// SampleRecord flags of the pmu collector: the data came from another core's cache holding the
// line modified (snoop HITM, the hardware's evidence of sharing), or from another node/socket.
inline constexpr uint8_t kSampleHitm = 4, kSampleRemote = 8;
enum class Section : uint32_t {
  Meta = 1, Levels, Counters, Strings, Modules, Threads, Instructions, Lines, Objects, Sites,
  // Sampling collectors (soft, pmu): raw facts, turned into the records above by
  // analysis::estimate() at report time. Readers of older builds skip them.
  Samples, Windows, Captures, Notes,
  // Soft mode's full-trace windows (TraceRecord, TraceAccessRecord). Readers of older builds
  // skip them.
  Traces, TraceAccesses,
  // How each instruction's consecutive L1 misses step through memory (StepRecord). Readers of
  // older builds skip it.
  MissSteps,
  // Exact mode's CPU-time samples (CpuSamplingRecord, CpuSampleRecord): where the program's
  // threads spent their CPU time, instrumented code or not. Readers of older builds skip them.
  CpuSampling, CpuSamples,
  // Exact mode's reuse-distance histograms (ReuseRecord), for miss-ratio curves. Readers of
  // older builds skip them.
  Reuse,
  // Exact mode's bounded log of every simulated access in simulation order (AccessLogRecord,
  // AccessLogEntries: packed uint64_t, see access_log_pack), for what-if replays
  // (analysis/predict.h). Readers of older builds skip them.
  AccessLog, AccessLogEntries,
  // Exact mode's data flow between threads (FlowInfoRecord, FlowRecord) and working sets over
  // time (WorkingSetInfoRecord, WorkingSetRecord), for `report --view flow|working-set`.
  // Readers of older builds skip them.
  FlowInfo, Flows, WorkingSetInfo, WorkingSet,
  // Accesses and outcomes per cache set of every level (SetCountRecord) and each instruction's
  // re-conflict distances at L1 (RcdRecord), for the `sets` view. Readers of older builds skip
  // them.
  SetCounts, Rcd,
  // Exact mode's spatial use of heap objects' lines (ObjectUseInfoRecord, ObjectUseRecord), for
  // the `fields` view. Readers of older builds skip them.
  ObjectUseInfo, ObjectUse,
  // Soft mode: when each traced access ran (uint64_t CLOCK_MONOTONIC ns, one per
  // TraceAccessRecord, same order), so threads that stepped at once replay in the order they
  // ran. Readers of older builds skip it; profiles without it replay round-robin.
  TraceTimes,
  // Exact mode's reuse tracker, one record per line size it followed (ReuseInfoRecord): how each
  // Reuse histogram was obtained (rate, accesses it could not follow). Readers of older builds
  // skip it; without it a histogram's own `rate` is all that is known.
  ReuseInfo,
  // Soft mode's pthread mutex hand-overs (LockInfoRecord, zero or one): counted natively and in
  // trace windows, to weigh coherence misses of critical sections (analysis/estimate.h). Readers
  // of older builds skip it; without it no miss is weighted.
  Locks,
};

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t section_count;
  uint64_t file_size;
  uint64_t checksum;  // of bytes [sizeof(FileHeader), file_size): checksum() (format 1: FNV-1a 64)
  uint8_t reserved[32];
};
static_assert(sizeof(FileHeader) == 64);

struct SectionHeader {
  uint32_t kind;         // Section
  uint32_t record_size;  // sizeof the record type, checked on read
  uint64_t count;
  uint64_t offset;       // from the start of the file
  uint64_t reserved;
};
static_assert(sizeof(SectionHeader) == 32);

struct MetaRecord {
  uint32_t mode;             // Mode
  uint32_t cores;            // simulated cores (exact); 0 = one per thread
  uint32_t policy;           // sim::Policy
  uint32_t inclusive_llc;
  int32_t exit_code;         // valid when exited == 1
  int32_t term_signal;       // the signal that ended the program, or 0
  uint32_t exited;           // 1: normal exit; 0: ended by a signal or still running
  uint32_t command_str;      // the program and its arguments, space-joined
  uint64_t pid;
  uint64_t start_ns, end_ns; // CLOCK_REALTIME
  uint64_t accesses;         // recorded accesses (exact: every instrumented access)
  uint64_t dropped_accesses; // accesses not recorded (runtime re-entered itself, disabled, ...)
  uint64_t dropped_records;  // records lost to full tables (instructions, lines, objects)
  uint64_t threads_seen;
  uint32_t geometry_source_str;
  uint32_t folded;           // 1 when more threads than cores: threads share simulated cores
  uint64_t samples;          // soft/pmu: samples taken (0 in exact mode)
  uint64_t sample_period_ns; // soft: task-clock period; pmu: mean sample period in events
  uint32_t capture_backend;  // CaptureBackend used for Windows/Captures
  uint32_t sample_source;    // SampleSource of the Samples section
  // Samples taken but not kept, by reason (DiscardReason).
  uint64_t discarded[kDiscardReasons];
};
static_assert(sizeof(MetaRecord) == 160);

struct LevelRecord {
  uint64_t size;
  uint32_t ways;
  uint32_t line;
  char name[8];
};
static_assert(sizeof(LevelRecord) == 24);

struct CounterRecord {  // one per level, like sim::LevelCounters
  uint64_t by_kind[kKinds][2];  // [kind][read, write]
  uint64_t writebacks, upgrades, coherence_invalidations, back_invalidations;
};
static_assert(sizeof(CounterRecord) == 128);

struct ModuleRecord {
  uint64_t load_bias;  // dl_iterate_phdr's dlpi_addr
  uint64_t start, end; // lowest and highest mapped address of its PT_LOAD segments
  uint32_t path_str;
  uint32_t reserved;
};
static_assert(sizeof(ModuleRecord) == 32);

struct ThreadRecord {
  uint32_t index;  // 0 = the first thread seen (main), in order of first access
  uint32_t tid;    // kernel thread id
  uint32_t core;   // simulated core
  uint32_t reserved;
  uint64_t accesses;
  uint64_t misses[kLevels];
};
static_assert(sizeof(ThreadRecord) == 56);

// One instruction: accesses and misses by level and kind (kind 0, hits, is not stored in
// misses). `ip` is the address of the instruction (exact mode: the return address of the
// instrumentation call minus one, inside the instruction sequence of the source line).
struct InstructionRecord {
  uint64_t ip;
  uint64_t accesses[2];  // read, write
  uint64_t misses[kLevels][kKinds];
  uint64_t l1_set_mask;  // L1 sets (mod 64) its L1 misses landed in
  uint64_t objects[kRefs];    // serials of heap objects its non-compulsory L1 misses touched
  uint32_t object_count;      // distinct heap objects seen (may exceed kRefs)
  uint32_t reserved;
  uint64_t sample_addrs[kRefs];  // addresses of some of its misses (to name globals)
};
static_assert(sizeof(InstructionRecord) == 296);

// How one instruction's L1 misses move through memory: each miss after the first, in one
// thread, is counted by its step from that thread's previous miss at the same instruction. The
// analysis tells a sweep, a column walk, pointer chasing and random access apart by these.
enum StepKind : int {
  kStepNext = 0,    // to the same line's neighbourhood: at most two lines away (a sweep)
  kStepStride,      // farther, by the step before's distance, +-1 line (a column walk)
  kStepPointer,     // to within 4 KiB past a value stored in the line the thread missed on
                    // last (exact mode, single-threaded simulation only: following a pointer)
  kStepIrregular,   // anything else (hashing, random indexing, or unchecked pointers)
  kStepKinds
};
struct StepRecord {
  uint64_t ip;
  uint64_t steps[kStepKinds];
  uint64_t pointer_checked;  // steps that were checked for kStepPointer
  int64_t stride;            // bytes of the latest kStepStride step (line granularity)
};
static_assert(sizeof(StepRecord) == 56);

// Reuse (LRU stack) distances, for miss-ratio curves (analysis/mrc.h): an access whose line was
// last used d distinct lines ago hits in a fully-associative LRU cache of more than d lines, and
// misses in any smaller one. Distances are counted in lines of `line_bytes` and kept in buckets:
// one per distance below 16, then 8 per power of two, so every power-of-two size is a bucket
// boundary (exact there). Counts are weighted: with spatial sampling (only lines whose hash
// falls under a threshold are followed, SHARDS) each sampled access counts 1/rate.
inline constexpr int kReuseBuckets = 312;  // distances up to 2^40 lines
inline int reuse_bucket(uint64_t d) {
  if (d < 16) return int(d);
  const int e = 63 - __builtin_clzll(d);  // >= 4
  const int b = 16 + (e - 4) * 8 + int((d >> (e - 3)) & 7);
  return b < kReuseBuckets ? b : kReuseBuckets - 1;
}
inline uint64_t reuse_bucket_low(int b) {  // the smallest distance in bucket b
  if (b < 16) return uint64_t(b);
  const int e = 4 + (b - 16) / 8;
  return uint64_t(8 + (b - 16) % 8) << (e - 3);
}
inline constexpr uint32_t kReuseProgram = 0, kReuseInstruction = 1;
struct ReuseRecord {
  uint64_t key;         // kReuseInstruction: the instruction's address; 0 for the program
  uint32_t scope;       // kReuse*
  uint32_t line_bytes;
  double cold;          // first accesses to a line (infinitely far), weighted
  double weighted;      // all weighted accesses: cold + sum of buckets
  double rate;          // the sampling rate at the end (1 = every line followed)
  double buckets[kReuseBuckets];
};
static_assert(sizeof(ReuseRecord) == 40 + 8 * kReuseBuckets);

// How the tracker followed one line size (Section::ReuseInfo; the program's ReuseRecord of the
// same line_bytes holds its distances). `dropped` accesses are in no histogram: their lines lay
// beyond the shadow's reach or no memory could be had for it, so a curve with dropped > 0 counts
// them as hits (it is partial). `how`: every line followed from the start, sampled from the
// start because a knob asked (WHYMISS_MRC*=sampled), or every line until the bound, then
// sampled (the rate halving until the lines fit).
inline constexpr uint32_t kReuseEveryLine = 0, kReuseSampledAsked = 1, kReuseSampledBound = 2;
struct ReuseInfoRecord {
  uint32_t line_bytes;
  uint32_t how;      // kReuse{EveryLine,SampledAsked,SampledBound}
  double rate;       // share of lines followed at the end (1: every line)
  uint64_t dropped;  // accesses to lines it could not follow
  uint64_t lines;    // lines followed at the end
  // Accesses counted at this line size beyond the profile's (meta.accesses): at half the line,
  // those that spanned both halves of their line are two accesses there. The curve's denominator
  // is meta.accesses + extra_accesses.
  uint64_t extra_accesses;
};
static_assert(sizeof(ReuseInfoRecord) == 40);

// One set of one level: its accesses by outcome (hit, then the miss kinds), summed over cores.
// A level with more than kMaxSetRecords sets is folded: `set` is the index modulo that (the
// analysis says so when the level's geometry has more sets).
inline constexpr uint64_t kMaxSetRecords = 65536;
struct SetCountRecord {
  uint32_t level;
  uint32_t set;
  uint64_t by_kind[kKinds];  // [0] hits, then misses by kind (sim::Outcome order)
};
static_assert(sizeof(SetCountRecord) == 56);

// Re-conflict distances (CCProf, CGO'18 §3.2): for each L1 miss of the instruction, how many L1
// misses the same thread took between the previous miss on the same L1 set and this one. Every
// miss kind counts (CCProf's RCD does not tell them apart). A thread's first miss on a set has no
// distance: it is counted in `first`. Bucket 0 holds distance 0, bucket b >= 1 distances in
// [2^(b-1), 2^b); the last bucket is open.
inline constexpr int kRcdBuckets = 24;
inline int rcd_bucket(uint64_t d) {
  if (d == 0) return 0;
  const int b = 64 - __builtin_clzll(d);  // d in [2^(b-1), 2^b)
  return b < kRcdBuckets ? b : kRcdBuckets - 1;
}
inline uint64_t rcd_bucket_low(int b) { return b == 0 ? 0 : uint64_t(1) << (b - 1); }
inline constexpr uint32_t kRcdCounted = 0, kRcdEstimated = 1, kRcdSampled = 2;
struct RcdRecord {
  uint64_t ip;
  uint32_t source;   // kRcd*: every miss simulated (exact), replayed trace windows, sampled misses
  uint32_t l1_sets;  // the L1 set count the distances were taken with (folded, <= kMaxSetRecords)
  uint64_t first;    // misses that were their thread's first on the set
  uint64_t buckets[kRcdBuckets];
};
static_assert(sizeof(RcdRecord) == 24 + 8 * kRcdBuckets);

// Spatial use (#17, exact mode): the lines of heap objects that L1 evicted to make room, with the
// bytes the program touched while L1 held them. A byte's phase is its offset from the object's
// start modulo 64: with an element size dividing 64 each phase is one byte of one field of every
// element. Only lines of at most 64 bytes are recorded (the simulator tracks single bytes there).
// Invalidations by another core's write, inclusion drops and lines still in L1 at the end are
// not counted.
inline constexpr int kUsePhases = 64;
struct ObjectUseRecord {
  uint64_t serial;         // ObjectRecord::serial
  uint64_t lines;          // evicted lines overlapping the object
  uint64_t fetched_bytes;  // bytes of those lines inside the object
  uint64_t touched_bytes;  // of those, bytes touched while L1 held the line
  uint64_t fetched[kUsePhases];  // per phase: evicted lines holding that byte of the object
  uint64_t touched[kUsePhases];  // per phase: of those, the lines in which it was touched
};
static_assert(sizeof(ObjectUseRecord) == 32 + 16 * kUsePhases);

struct ObjectUseInfoRecord {
  uint32_t line_bytes;        // the L1 line the phases were taken with
  uint32_t capacity;          // objects the table holds
  uint64_t evicted_lines;     // all L1 evictions to make room
  uint64_t outside_lines;     // of those, lines in no live heap object
  uint64_t objects;           // objects in the table (the ObjectUseRecords)
  uint64_t dropped_lines;     // evicted lines of objects the full table had no room for
};
static_assert(sizeof(ObjectUseInfoRecord) == 40);

// A cache line that suffered coherence misses, with the evidence for true vs false sharing.
struct LineRecord {
  uint64_t line;  // line address (address / line size)
  uint64_t misses[kKinds];     // at L1, by kind
  uint32_t threads[kLineThreads];       // thread indices that touched it (kNoThread = unused)
  uint64_t read_mask[kLineThreads];     // granules each of those threads read / wrote
  uint64_t write_mask[kLineThreads];
  uint64_t ips[kRefs];                  // instructions that missed on it
  uint64_t objects[kRefs];              // serials of heap objects overlapping it
  uint32_t thread_count, object_count;
};
static_assert(sizeof(LineRecord) == 288);
inline constexpr uint32_t kNoThread = 0xFFFFFFFFu;

// A heap object that suffered misses (live or freed).
struct ObjectRecord {
  uint64_t serial;  // allocation number, unique for the run
  uint64_t start;
  uint64_t size;
  uint32_t alloc_thread;  // thread index
  uint32_t site;          // Sites index, or kNoSite
  uint64_t misses[kKinds];  // at L1, by kind
  uint64_t thread_mask;     // threads (index mod 64) that missed on it
  uint64_t l1_set_mask;
  uint32_t freed;
  // Of misses[kind conflict]: those where at least as many other lines of this object as L1 has
  // ways went through the missed line's set since it was evicted (Hierarchy::rivals_within):
  // the object's own layout (a stride within it) caused them, not other data. Saturates; 0 in
  // profiles that did not measure it.
  uint32_t self_conflicts;
};
static_assert(sizeof(ObjectRecord) == 104);

inline constexpr int kSiteFrames = 8;
struct SiteRecord {  // an allocation call stack: return addresses, innermost (the caller) first
  uint64_t frames[kSiteFrames];
  uint32_t depth;
  uint32_t reserved;
};
static_assert(sizeof(SiteRecord) == 72);

// One sample: a memory instruction the program was executing (soft: the instruction before the
// interrupted RIP; pmu: the precise ip of the sampled load/store) and its effective address.
struct SampleRecord {
  uint64_t time_ns;   // CLOCK_MONOTONIC
  uint64_t ip;        // start address of the memory instruction
  uint64_t addr;      // effective address of its (first) memory operand
  uint64_t object;    // serial of the heap object containing addr, 0 if none/unknown
  uint32_t thread;    // thread index
  uint16_t size;      // operand size in bytes
  uint8_t flags;      // kAccessRead | kAccessWrite
  uint8_t level;      // pmu: level index the data came from (0 = L1 hit, levels.size() = memory);
                      // kLevelUnknown in soft mode
  uint32_t weight;    // soft: nanoseconds of task-clock the sample stands for; pmu: latency (cycles)
  uint32_t reserved;
};
static_assert(sizeof(SampleRecord) == 48);

// A window: a bounded run of captures of one instruction, armed at start_ns, ended at end_ns.
struct WindowRecord {
  uint64_t ip;
  uint64_t start_ns, end_ns;
  uint32_t captures;  // CaptureRecords belonging to it
  uint32_t dropped;   // executions that trapped but could not be stored
  uint32_t reason;    // why it was armed: 0 = hot (time-weighted samples), 1 = shared line
  uint32_t reserved;
  uint64_t reserved2;
};
static_assert(sizeof(WindowRecord) == 48);

// One captured execution of a watched instruction, taken before it executed, with the exact
// address it accessed. Captures of all windows, all threads, in time order per thread.
struct CaptureRecord {
  uint64_t time_ns;
  uint64_t ip;
  uint64_t addr;
  uint64_t object;    // heap object serial, 0 if none/unknown
  uint32_t thread;
  uint32_t window;    // index into Windows
  uint16_t size;
  uint8_t flags;
  uint8_t reserved[5];
};
static_assert(sizeof(CaptureRecord) == 48);

// A full-trace window: one thread single-stepped itself (trap flag) for up to `steps`
// instructions and recorded every data access before it ran. Windows of one `epoch` were opened
// together for every thread running then; the estimator replays them together.
enum class TraceEnd : uint32_t {
  Done = 0,       // the step budget ran out
  Syscall = 1,    // the next instruction enters the kernel (syscall, sysenter, int n)
  Flags = 2,      // the next instruction reads or restores the trap flag (pushf, popf, iret)
  Stopped = 3,    // the run ended (or the collector stopped) during the window
  Full = 4,       // the access store was full
  Undecodable = 5,  // an instruction the decoder could not read
  Lost = 6,       // the thread lost its trap flag (a handler of the program did not return)
};
struct TraceRecord {
  uint64_t start_ns, end_ns;  // CLOCK_MONOTONIC; end_ns = 0 if the window never ended
  uint32_t thread;            // thread index
  uint32_t epoch;             // windows opened together share it (1, 2, ...)
  uint32_t steps;             // instructions stepped (recorded or not)
  uint32_t accesses;          // TraceAccessRecords of this window
  uint32_t dropped;           // accesses not stored (store full)
  uint32_t end;               // TraceEnd
  uint32_t skipped;           // accesses not recorded: implicit stack slots, the runtime's own code
  uint32_t reserved;
};
static_assert(sizeof(TraceRecord) == 48);

// One data access of a full-trace window, in program order within its window.
struct TraceAccessRecord {
  uint64_t ip;
  uint64_t addr;
  uint64_t object;  // heap object serial, 0 if none
  uint32_t window;  // index into Traces
  uint16_t size;
  uint8_t flags;    // kAccessRead | kAccessWrite
  uint8_t marks;    // kTraceAfterSyscall; 0 in profiles that predate it
};
static_assert(sizeof(TraceAccessRecord) == 32);
// The thread stepped over a system call since its previous recorded access: the time between
// the two (TraceTimes) includes however long the call blocked (a futex wait, a read).
inline constexpr uint8_t kTraceAfterSyscall = 1;
// The access ran inside a pthread mutex lock or unlock call (glibc's traffic on the lock word),
// or while its thread held at least one mutex taken through those calls (a critical section).
// Set only by runtimes that interpose the calls (LockInfoRecord present).
inline constexpr uint8_t kTraceInLockCall = 2, kTraceLockHeld = 4;

// Soft mode: acquisitions of pthread mutexes (counted when they are released through
// pthread_mutex_unlock) whose previous holder was known, and how many of them changed hands (the
// previous holder was another thread), counted by the runtime's hooks natively (in accounting
// periods, ~3 % of the run, while no thread steps) and in trace windows (between stepping
// threads). Stepping slows the threads' own code ~1000x but not
// the kernel's wake-ups, so a contended mutex changes hands far more often per acquisition in a
// window than natively; the ratio of the two hand-over shares weighs the coherence misses of
// critical sections replayed from the windows. `untracked`: acquisitions with no known previous
// holder, not counted above (a mutex's first release in a period or window, or one whose slot in
// the runtime's table of last holders another mutex had taken).
struct LockInfoRecord {
  uint64_t native_acquisitions, native_handovers;
  uint64_t traced_acquisitions, traced_handovers;
  uint64_t untracked;
  uint64_t reserved;
};
static_assert(sizeof(LockInfoRecord) == 48);

// Exact mode's CPU-time sampling: every thread the runtime records has a timer on its own CPU
// clock (timer_create(CLOCK_THREAD_CPUTIME_ID), SIGEV_THREAD_ID) that interrupts it every
// `period_ns` of its CPU time; the handler notes where the thread was. The report tells from
// these how much of the program's time ran in code whymiss-cc did not instrument (whose accesses
// were not simulated). One CpuSamplingRecord when the runtime sampled; none in older profiles.
enum class CpuClock : uint32_t { None = 0, ThreadCpuTimer = 1 };
struct CpuSamplingRecord {
  uint64_t period_ns;       // thread CPU time between samples
  uint64_t taken;           // samples recorded (CpuSamples holds them)
  uint64_t dropped;         // samples not recorded: the store was full
  uint64_t overruns;        // timer expirations merged into one signal (the thread had the
                            // signal blocked or pending): not recorded
  uint32_t threads;         // threads that had a timer
  uint32_t failed_threads;  // threads whose timer could not be created (see Notes)
  uint32_t clock;           // CpuClock
  uint32_t signo;           // the real-time signal the timers sent
};
static_assert(sizeof(CpuSamplingRecord) == 48);
// CpuSampleRecord flags.
inline constexpr uint32_t kCpuSampleInRuntime = 1;  // the thread was inside whymiss's runtime
struct CpuSampleRecord {
  uint64_t time_ns;  // CLOCK_MONOTONIC
  uint64_t ip;       // the interrupted user-mode instruction (after a system call: the
                     // instruction following it, so kernel time counts to its caller)
  uint32_t thread;   // thread index
  uint32_t flags;    // kCpuSample*
};
static_assert(sizeof(CpuSampleRecord) == 24);

// Exact mode's access log: the first `kept` accesses of the run, each packed into 8 bytes, in the
// order the simulator took them (all threads in one stream). When the log was full, later
// accesses were counted (`total`) but not kept: what-if replays then cover a prefix of the run.
struct AccessLogRecord {
  uint64_t capacity;  // entries the log could hold (WHYMISS_ACCESS_LOG)
  uint64_t kept;      // entries in AccessLogEntries
  uint64_t total;     // accesses the simulator took in all (kept + not kept)
  uint32_t line;      // the simulated line size (bytes)
  uint32_t reserved;
};
static_assert(sizeof(AccessLogRecord) == 32);
// One entry: bits 0-47 the byte address, 48-55 size-1 (sizes above 256 are cut to 256; ranges
// reach the log in line-sized pieces), 56 write, 57-63 thread index mod 128.
inline constexpr uint64_t kLogAddrMask = (uint64_t(1) << 48) - 1;
inline uint64_t access_log_pack(uint64_t addr, uint32_t size, bool write, uint32_t thread) {
  const uint64_t sz = size == 0 ? 0 : size > 256 ? 255 : size - 1;
  return (addr & kLogAddrMask) | sz << 48 | uint64_t(write) << 56 | uint64_t(thread & 127) << 57;
}
inline uint64_t log_addr(uint64_t e) { return e & kLogAddrMask; }
inline uint32_t log_size(uint64_t e) { return uint32_t((e >> 48) & 255) + 1; }
inline bool log_write(uint64_t e) { return (e >> 56) & 1; }
inline uint32_t log_thread(uint64_t e) { return uint32_t(e >> 57); }
// ---- data flow (exact mode; analysis/flow.h) ----
// How heap objects pass between threads. Per object the runtime remembers the thread that last
// touched it (an L1 miss, or a write upgrading a shared copy); a touch by another thread is a
// handover from that thread to this one. An object's first touch is a handover from its
// allocation (from_kind kFlowAlloc, from = the allocating thread), whoever makes it. Handovers
// are counted per (allocation site, from, from_kind, to, to_kind); the L1 misses of the object
// by the receiving thread, until the next handover, are charged to the handover that made it
// the holder. One record per such key; the example object names the site's data for a
// TypeOracle.
inline constexpr uint8_t kFlowAlloc = 0, kFlowRead = 1, kFlowWrite = 2;
struct FlowRecord {
  uint32_t site;          // Sites index, or kNoSite
  uint32_t from, to;      // thread indices
  uint8_t from_kind;      // kFlow*: how `from` came to hold the object (alloc, read, write)
  uint8_t to_kind;        // kFlowRead or kFlowWrite: the access that handed it over
  uint16_t reserved;
  uint64_t handovers;     // how many times
  uint64_t misses;        // L1 misses charged to it (see above)
  uint64_t example_serial, example_start, example_size;  // one object it happened to
  uint32_t example_alloc_thread;
  uint32_t reserved2;
};
static_assert(sizeof(FlowRecord) == 64);
struct FlowInfoRecord {
  uint64_t capacity;            // keys the runtime's table holds
  uint64_t dropped_handovers;   // handovers of keys the full table had no room for
  uint64_t dropped_misses;      // misses charged to those
  uint64_t objects;             // distinct heap objects touched
  uint64_t reserved[4];
};
static_assert(sizeof(FlowInfoRecord) == 64);

// ---- working set over time (exact mode; analysis/working_set.h) ----
// At intervals the runtime walks every simulated cache's tags and counts the lines resident,
// per level (private levels: summed over cores) and allocation site. Sample i is taken at the
// first L1 miss after l1_misses reached (i + 1) * period (the period doubles, and every other sample
// is dropped, when the table fills), plus one at the end of the run. A level of more than
// 65,536 lines is counted in a sample of its sets (WorkingSetInfoRecord::set_step).
inline constexpr uint32_t kWsNotHeap = 0xFFFFFFFEu;  // site of lines in no heap object
struct WorkingSetInfoRecord {
  uint64_t period;          // L1 misses between samples, at the end
  uint32_t samples;         // samples kept (WorkingSetRecord::sample < samples)
  uint32_t max_groups;      // sites counted per sample; lines of further sites are `other`
  uint64_t dropped_lines;   // lines of sites past max_groups, over all samples
  // Per level: 1 = every set's lines were counted; k > 1 = only every k-th set's, and
  // WorkingSetRecord::lines holds their count times k (an estimate; bounds a walk's cost).
  uint32_t set_step[kLevels];
  uint64_t reserved[3];
};
static_assert(sizeof(WorkingSetInfoRecord) == 64);
struct WorkingSetRecord {
  uint32_t sample;      // 0.. in time order
  uint32_t level;       // index into the geometry
  uint32_t site;        // Sites index, kNoSite (heap, site unknown) or kWsNotHeap
  uint32_t reserved;
  uint64_t time_ns;     // CLOCK_MONOTONIC - the run's start
  uint64_t l1_misses;   // L1 misses of the program when the sample was taken
  uint64_t lines;       // lines of the site resident at the level (x set_step: see above)
  uint64_t example_serial, example_start, example_size;  // one object of the site (0 if none)
};
static_assert(sizeof(WorkingSetRecord) == 64);

// A remark of the collector for the report (e.g. why the capture stage was off).
struct NoteRecord {
  uint32_t text_str;
  uint32_t severity;  // 0 info, 1 warning
};
static_assert(sizeof(NoteRecord) == 8);

// The whole profile in memory (reader side; the runtime writes sections straight from its own
// tables with write_profile_sections).
struct Profile {
  MetaRecord meta{};
  std::string command;
  std::string geometry_source;
  CacheGeometry geometry;
  std::vector<CounterRecord> counters;  // one per level
  struct Module { ModuleRecord rec; std::string path; };
  std::vector<Module> modules;
  std::vector<ThreadRecord> threads;
  std::vector<InstructionRecord> instructions;
  std::vector<LineRecord> lines;
  std::vector<ObjectRecord> objects;
  std::vector<SiteRecord> sites;
  // Sampling collectors only.
  std::vector<SampleRecord> samples;
  std::vector<WindowRecord> windows;
  std::vector<CaptureRecord> captures;
  std::vector<TraceRecord> traces;
  std::vector<TraceAccessRecord> trace_accesses;
  std::vector<uint64_t> trace_times;  // empty, or one per trace_accesses entry (Section::TraceTimes)
  std::vector<LockInfoRecord> locks;  // zero or one (Section::Locks)
  std::vector<StepRecord> steps;
  std::vector<ReuseRecord> reuse;
  std::vector<ReuseInfoRecord> reuse_info;  // empty in profiles of older builds
  std::vector<SetCountRecord> set_counts;
  std::vector<RcdRecord> rcd;
  // Exact mode's spatial use (empty in older profiles, other modes, WHYMISS_SPATIAL=0).
  std::vector<ObjectUseInfoRecord> object_use_info;  // zero or one
  std::vector<ObjectUseRecord> object_use;
  // Exact mode's CPU-time samples (empty in older profiles and other modes).
  std::vector<CpuSamplingRecord> cpu_sampling;  // zero or one
  std::vector<CpuSampleRecord> cpu_samples;
  // Exact mode's access log (empty in older profiles, other modes, WHYMISS_ACCESS_LOG=0).
  std::vector<AccessLogRecord> access_log_info;  // zero or one
  std::vector<uint64_t> access_log;              // access_log_pack entries
  // Exact mode's data flow and working set (empty in older profiles and other modes).
  std::vector<FlowInfoRecord> flow_info;  // zero or one
  std::vector<FlowRecord> flows;
  std::vector<WorkingSetInfoRecord> working_set_info;  // zero or one
  std::vector<WorkingSetRecord> working_set;
  struct Note { uint32_t severity; std::string text; };
  std::vector<Note> notes;
};

// The largest profile a reader accepts (a header claiming more is refused before reading on).
inline constexpr uint64_t kMaxProfileBytes = uint64_t(64) << 30;
// How standard input is named in error sentences (every reader of whymiss says it the same way).
inline constexpr const char* kStdinName = "<stdin>";

// Reads and checks a profile; errors are one sentence naming the file. `-` is standard input.
// Any kind of file can be read (a pipe, a device): the header is checked before anything else,
// and no more than the size it gives is read.
Result<Profile> read_profile(const std::string& path);
// The same from bytes in memory (`name` is used in error sentences).
Result<Profile> parse_profile(const uint8_t* data, size_t size, const std::string& name);

// Format 2's checksum of `n` bytes (FileHeader::checksum covers the bytes after the header): four
// lanes of 64-bit multiply-rotate steps over the bytes' 8-byte words, then a fold with the byte
// count. Detects corruption, not tampering. Async-signal-safe (no allocation).
uint64_t checksum(const void* data, size_t n);

// Where a section producer puts its bytes (SectionData::produce); false: stop, the write failed.
using PutBytes = bool (*)(void* ctx, const void* data, size_t n);

// A section to write: `count` records of `record_size` bytes at `data`, or, when `produce` is
// set, made by produce(produce_arg, put, ctx): it calls put for all count * record_size bytes
// in file order and returns false as soon as a put does. It runs twice (the checksum, then the
// write) and must give the same bytes both times; a producer that gives a different number of
// bytes fails the write (EIO). It lets a writer stream a section it never holds in one piece
// (soft mode's traced accesses: soft/trace.h).
struct SectionData {
  Section kind;
  uint32_t record_size;
  uint64_t count;
  const void* data;
  bool (*produce)(const void* produce_arg, PutBytes put, void* ctx) = nullptr;
  const void* produce_arg = nullptr;
};

// Writes sections to `path` atomically: a temporary file beside it ("path.tmp.PID.N", created
// with O_EXCL|O_NOFOLLOW and mode 0600, so a file or symlink someone else put at that name is
// never opened), then rename over `path`. Uses only open/write/fsync/rename/unlink and no heap,
// so the runtime can call it late in a dying process; errno is preserved. Returns 0 or an errno
// value.
int write_profile_sections(const char* path, const SectionData* sections, uint32_t n);
// Writes the same bytes to an open descriptor, front to back (no seeking: pipes and devices
// work). Returns 0 or an errno value.
int write_profile_fd(int fd, const SectionData* sections, uint32_t n);

// Convenience for tools and tests: writes a Profile through write_profile_sections.
Status write_profile(const std::string& path, const Profile& p);
// The bytes of the file write_profile would write.
std::string encode_profile(const Profile& p);
// The same bytes written to an open descriptor, front to back, straight from the profile's
// tables (a profile with a full access log is tens of MiB: no copy of it is made). Returns 0 or
// an errno value.
int write_profile_to_fd(int fd, const Profile& p);

}  // namespace whymiss::profile
