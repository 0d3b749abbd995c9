// Local benchmark (not a test): CPU time per access of exact mode's reuse-distance tracker
// (reuse.h), fed directly with synthetic address streams, each already free of repeats of the
// previous line (those never reach it in a run). Prints ns per access per stream; each stream
// starts from a fresh tracker (one process each: the tracker is a process-wide singleton).
//   [WHYMISS_MRC_HALF=all|sampled|0] runtime_reuse_bench [accesses per stream, default 20000000]
//                                                        [stream index, default all]
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "runtime/exact/reuse.h"

using namespace whymiss::rt;

static double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000000;
  const int only = argc > 2 ? std::atoi(argv[2]) : -1;
  if (only < 0) {
    for (int k = 0; k < 5; ++k) {
      char cmd[4096];
      std::snprintf(cmd, sizeof cmd, "'%s' %zu %d", argv[0], n, k);
      if (std::system(cmd) != 0) return 1;
    }
    return 0;
  }
  reuse::Knobs k;  // WHYMISS_MRC_HALF as in a run: the half-line stack's cost is all vs 0
  reuse::half_knob(std::getenv("WHYMISS_MRC_HALF"), &k);
  if (!reuse::start(6, k)) return 1;
  std::mt19937_64 r(1);
  const uint64_t base = 0x7f0000000000ull;
  struct Stream {
    const char* name;
    std::vector<uint64_t> addrs;
  } streams[5];
  // Sequential sweeps over 2 MiB (32 Ki lines): every reuse far, the 128-byte stack sees pairs.
  streams[0].name = "sweep 2 MiB";
  for (size_t i = 0; i < n && only == 0; ++i) streams[0].addrs.push_back(base + (i % (1 << 15)) * 64);
  // Column walk: 4 KiB stride over 8 MiB, then the next column.
  streams[1].name = "column 8 MiB";
  for (size_t i = 0; i < n && only == 1; ++i) streams[1].addrs.push_back(base + ((i % 2048) * 4096 + (i / 2048) % 64 * 64) % (8 << 20));
  streams[2].name = "random 256 KiB";
  for (size_t i = 0; i < n && only == 2; ++i) streams[2].addrs.push_back(base + (r() % (1 << 12)) * 64);
  streams[3].name = "random 64 MiB";
  for (size_t i = 0; i < n && only == 3; ++i) streams[3].addrs.push_back(base + (r() % (1 << 20)) * 64);
  streams[4].name = "hot 16 lines + random 1 MiB";
  for (size_t i = 0; i < n && only == 4; ++i)
    streams[4].addrs.push_back(base + (r() % 5 ? r() % 16 : 16 + r() % (1 << 14)) * 64);
  for (auto& s : streams) {
    if (&s - streams != only) continue;
    const double t0 = cpu_now();
    for (size_t i = 0; i < s.addrs.size(); ++i) reuse::access(0x401000 + (i & 3) * 4, s.addrs[i], 1, false);
    const double t1 = cpu_now();
    std::printf("%-30s %6.1f ns/access\n", s.name, (t1 - t0) * 1e9 / double(s.addrs.size()));
  }
  return 0;
}
