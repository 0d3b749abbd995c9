// Local benchmark (not a test): CPU time per access of exact mode's reuse-distance tracker
// (reuse.h), fed directly with synthetic address streams, each already free of repeats of the
// previous line (those never reach it in a run). Prints ns per access per stream; each stream
// starts from a fresh tracker (one process each: the tracker is a process-wide singleton).
//   [WHYMISS_MRC_HALF=all|sampled|0] runtime_reuse_bench [accesses per stream, default 20000000]
//                                                        [stream index, default all]
// Or a recorded stream, applied as the tracker's worker applies its buffers (Knobs::thread, here
// without a worker thread: the caller applies each buffer once all are queued), repeated in fresh
// processes; prints the median ns per event and a checksum of the program histograms (to compare
// two builds of the tracker for sameness):
//   runtime_reuse_bench --events FILE [repetitions, default 3]
// FILE holds the tracker's 16-byte events (reuse.cpp's Event: instruction with its flag bits, then
// the half line) at 64-byte lines, as a runtime built with -DWHYMISS_REUSE_DUMP writes them under
// WHYMISS_MRC_DUMP=FILE (bench/README.md, "Miss-ratio curves").
#include <time.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
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

namespace {

struct Event {
  uint64_t ip, half;
};
constexpr uint64_t kSwitch = uint64_t(1) << 63, kSpans = uint64_t(1) << 62;

// One repetition, in a child: returns ns per event and the histograms' checksum through `fd`.
[[noreturn]] void replay_child(const std::vector<Event>& v, int fd) {
  reuse::Knobs k;
  reuse::half_knob(std::getenv("WHYMISS_MRC_HALF"), &k);
  k.thread = true;
  k.worker = false;
  if (!reuse::start(6, k)) _exit(3);
  const double t0 = cpu_now();
  for (const Event& e : v) {
    const uint64_t half = e.half;
    if (e.ip & kSwitch) reuse::half_switch(half << 5);
    else if (e.ip & kSpans) reuse::access(e.ip & ~kSpans, (half << 5) | 31, 2, false);  // ends in the next half
    else reuse::access(e.ip, half << 5, 1, false);
  }
  std::vector<whymiss::profile::ReuseRecord> recs(reuse::record_count());
  const size_t got = reuse::export_records(recs.data(), recs.size());
  const double t1 = cpu_now();
  uint64_t sum = 0;
  for (size_t i = 0; i < got; ++i) {
    sum = sum * 1000003 + uint64_t(recs[i].cold) + recs[i].key;
    for (double b : recs[i].buckets) sum = sum * 1000003 + uint64_t(b);
  }
  const double out[2] = {(t1 - t0) * 1e9 / double(v.size()), double(sum >> 12)};
  _exit(write(fd, out, sizeof out) == sizeof out ? 0 : 4);
}

int replay(const char* path, unsigned reps) {
  std::vector<Event> v;
  if (FILE* f = std::fopen(path, "rb")) {
    Event e;
    while (std::fread(&e, sizeof e, 1, f) == 1) v.push_back(e);
    std::fclose(f);
  }
  if (v.empty()) {
    std::fprintf(stderr, "runtime_reuse_bench: %s holds no events\n", path);
    return 1;
  }
  std::vector<double> ns;
  double sum = 0;
  for (unsigned r = 0; r < reps; ++r) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) replay_child(v, fds[1]);
    close(fds[1]);
    double out[2] = {0, 0};
    const bool ok = read(fds[0], out, sizeof out) == sizeof out;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!ok) {
      std::fprintf(stderr, "runtime_reuse_bench: a repetition failed\n");
      return 1;
    }
    ns.push_back(out[0]);
    sum = out[1];
  }
  std::sort(ns.begin(), ns.end());
  std::printf("%s: %zu events, %.2f ns per event (median of %u, fastest %.2f), histograms %.0f\n", path,
              v.size(), ns[ns.size() / 2], reps, ns[0], sum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--events") == 0)
    return replay(argv[2], argc > 3 ? unsigned(std::max(1, std::atoi(argv[3]))) : 3);
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
