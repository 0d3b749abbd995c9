// The profile file: what a collector (exact, soft, pmu) records and the analysis reads.
//
// Layout: FileHeader, then `section_count` SectionHeaders, then the sections' bytes. Every
// record is a fixed-size POD struct declared here; sizes are static_asserted so the format
// cannot drift silently. The header carries the file size and an FNV-1a checksum of all bytes
// after the header; a reader rejects a file whose magic, version, size, checksum or section
// table does not hold. Writers write to a temporary file and rename it into place.
// Integers are little-endian (x86-64 only). Strings live in the Strings section, referenced by
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
inline constexpr uint32_t kVersion = 1;
inline constexpr int kKinds = 6;      // sim::Outcome: hit, compulsory, capacity, conflict, TS, FS
inline constexpr int kLevels = 4;     // kMaxLevels
inline constexpr int kLineThreads = 8;   // threads remembered per shared line
inline constexpr int kRefs = 4;          // objects / instructions / addresses remembered per record
inline constexpr uint32_t kNoString = 0xFFFFFFFFu;
inline constexpr uint32_t kNoSite = 0xFFFFFFFFu;

enum class Mode : uint32_t { Exact = 1, Soft = 2, Pmu = 3 };
enum class Section : uint32_t {
  Meta = 1, Levels, Counters, Strings, Modules, Threads, Instructions, Lines, Objects, Sites,
};

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t section_count;
  uint64_t file_size;
  uint64_t checksum;  // FNV-1a 64 of bytes [sizeof(FileHeader), file_size)
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
  uint8_t reserved[56];
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
  uint32_t reserved;
};
static_assert(sizeof(ObjectRecord) == 104);

inline constexpr int kSiteFrames = 8;
struct SiteRecord {  // an allocation call stack: return addresses, innermost (the caller) first
  uint64_t frames[kSiteFrames];
  uint32_t depth;
  uint32_t reserved;
};
static_assert(sizeof(SiteRecord) == 72);

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
};

// Reads and checks a profile; errors are one sentence naming the file.
Result<Profile> read_profile(const std::string& path);
// The same from bytes in memory (`name` is used in error sentences).
Result<Profile> parse_profile(const uint8_t* data, size_t size, const std::string& name);

// A section to write: `count` records of `record_size` bytes at `data`.
struct SectionData {
  Section kind;
  uint32_t record_size;
  uint64_t count;
  const void* data;
};

// Writes sections to `path` atomically (a temporary file beside it, then rename). Uses only
// open/write/rename/unlink and no heap, so the runtime can call it late in a dying process.
// Returns 0 or an errno value.
int write_profile_sections(const char* path, const SectionData* sections, uint32_t n);

// Convenience for tools and tests: writes a Profile through write_profile_sections.
Status write_profile(const std::string& path, const Profile& p);

}  // namespace whymiss::profile
