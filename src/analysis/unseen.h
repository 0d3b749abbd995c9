// Work exact mode cannot see: how much of the program's CPU time ran in code whymiss-cc did not
// instrument (a library built with plain gcc, libc, the dynamic loader), whose memory accesses
// never reached the simulator. From the CPU-time samples of an exact-mode profile
// (profile::CpuSampleRecord) and which of its modules were instrumented (decided by the caller
// from the module files, see symbols/instrumented.h), post-mortem. Single-threaded.
//
// Every sample stands for the same CPU time (one timer period of one thread), so shares of
// samples are shares of CPU time, with the sampling error of a count (about 1/sqrt(samples)).
// Samples taken inside whymiss's runtime (its library, or any code while the thread was inside
// the runtime) are whymiss's own overhead, not the program's: they are counted apart, and the
// shares are of the program's samples (instrumented + not), approximating its native time
// split (instrumented code itself runs somewhat slower than native, so the uninstrumented share
// is if anything understated).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/profile.h"

namespace whymiss::analysis {

enum class CodeKind { Instrumented, NotInstrumented, WhymissRuntime, Unreadable };

struct UnseenKnobs {
  double warn_share = 0.20;  // warn (first in the report) from this share of CPU time on
  uint64_t min_samples = 5;  // fewer program samples than this: too few to tell anything
};

struct ModuleTime {
  std::string path;       // "" = code outside every recorded module (vDSO, generated code)
  CodeKind kind = CodeKind::NotInstrumented;
  bool partly_seen = false;  // libc: memcpy/memset/memmove called from instrumented code are
                             // simulated (whymiss-cc wraps them); its other functions are not
  uint64_t samples = 0;
  double share = 0;          // of the program's samples
};

struct UnseenWork {
  bool measured = false;      // the profile has CPU-time samples (exact mode, this version on)
  uint64_t period_ns = 0;     // thread CPU time per sample
  uint64_t samples = 0;       // the program's samples (whymiss's excluded)
  uint64_t whymiss_samples = 0;
  uint64_t instrumented_samples = 0;
  uint64_t unseen_samples = 0;  // outside instrumented code
  double unseen_share = 0;      // unseen_samples / samples
  uint64_t dropped = 0;         // samples lost (store full, merged timer expirations)
  uint32_t unsampled_threads = 0;
  std::vector<ModuleTime> modules;  // outside instrumented code, most samples first
  bool enough = false;   // samples >= min_samples
  bool warn = false;     // enough, and unseen_share >= warn_share
};

// `kinds[i]` says what p.modules[i] is (a shorter vector leaves the rest Unreadable).
UnseenWork unseen_work(const profile::Profile& p, const std::vector<CodeKind>& kinds,
                       const UnseenKnobs& k = {});

// True for the C library's file name (libc.so.6, libc-2.31.so, ...), which whymiss-cc programs
// call into directly.
bool is_libc(const std::string& path);

}  // namespace whymiss::analysis
