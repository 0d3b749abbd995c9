// Without libFuzzer: a driver for LLVMFuzzerTestOneInput that CI can run as an ordinary CTest test.
//
//   fuzz_x CORPUS_DIR...                      replays every file of the corpus directories
//   fuzz_x --mutate ITERS --seconds S [--seed N] [--max-len BYTES] CORPUS_DIR...
//                                             replays them, then runs random mutations of them
//                                             until ITERS inputs or S seconds, whichever first
//
// Mutation mode is a small random-mutation fuzzer (no coverage feedback): each input is a corpus
// file put through 1-8 random edits (bit flips, random or boundary bytes and 16/32/64-bit
// integers, inserted, erased or duplicated runs, a splice with another corpus file, a truncation).
// The generator is seeded (default 1), so a run is the same sequence of inputs every time; the
// time bound only cuts it short. An input that crashes the target (a signal: abort, trap,
// segfault) is written to ./crash-<target>-<seed>-<iteration> before the driver exits with status
// 99, so the failure can be kept and replayed. Exit status: 0 done, 1 empty corpus, 2 bad usage.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The input being tried, for the crash handler (which may only use async-signal-safe calls).
const uint8_t* g_cur = nullptr;
size_t g_cur_len = 0;
char g_crash_path[512] = {};

void on_crash(int sig) {
  const int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    for (size_t off = 0; off < g_cur_len;) {
      const ssize_t n = ::write(fd, g_cur + off, g_cur_len - off);
      if (n <= 0) break;
      off += size_t(n);
    }
    ::close(fd);
  }
  const char head[] = "fuzz: found a crash (signal ";
  char num[16];
  int k = 0;
  for (int s = sig; s > 0 || k == 0; s /= 10) num[k++] = char('0' + s % 10);
  (void)!::write(2, head, sizeof head - 1);
  while (k > 0) (void)!::write(2, &num[--k], 1);
  const char mid[] = "); input saved as ";
  (void)!::write(2, mid, sizeof mid - 1);
  (void)!::write(2, g_crash_path, std::strlen(g_crash_path));
  (void)!::write(2, "\n", 1);
  ::_exit(99);
}

// splitmix64: small, fast, and the same sequence on every platform.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? size_t(next() % n) : 0; }
};

// Values that tend to sit on boundaries of sizes, counts and offsets.
constexpr uint64_t kInteresting[] = {0,          1,          2,          7,
                                     8,          15,         16,         63,
                                     64,         127,        128,        255,
                                     256,        4095,       4096,       65535,
                                     65536,      0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                                     1ull << 32, 1ull << 40, ~0ull >> 1, ~0ull};

void mutate(std::vector<uint8_t>& b, const std::vector<std::vector<uint8_t>>& corpus, Rng& r,
            size_t max_len) {
  const int edits = 1 + int(r.below(8));
  for (int e = 0; e < edits; ++e) {
    switch (r.below(10)) {
      case 0:  // flip a bit
        if (!b.empty()) b[r.below(b.size())] ^= uint8_t(1u << r.below(8));
        break;
      case 1:  // a random byte
        if (!b.empty()) b[r.below(b.size())] = uint8_t(r.next());
        break;
      case 2: {  // an interesting integer of 1, 2, 4 or 8 bytes, little-endian
        const size_t w = size_t(1) << r.below(4);
        if (b.size() < w) break;
        const uint64_t v = kInteresting[r.below(sizeof kInteresting / sizeof kInteresting[0])];
        std::memcpy(&b[r.below(b.size() - w + 1)], &v, w);
        break;
      }
      case 3: {  // an ASCII digit or separator (the text formats)
        static const char kChars[] = "0123456789abcdefxXRW #\n\t\r:=,KMG-";
        if (!b.empty()) b[r.below(b.size())] = uint8_t(kChars[r.below(sizeof kChars - 1)]);
        break;
      }
      case 4: {  // insert random bytes
        const size_t n = 1 + r.below(16);
        const size_t at = r.below(b.size() + 1);
        std::vector<uint8_t> ins(n);
        for (auto& c : ins) c = uint8_t(r.next());
        b.insert(b.begin() + ptrdiff_t(at), ins.begin(), ins.end());
        break;
      }
      case 5: {  // erase a run
        if (b.empty()) break;
        const size_t at = r.below(b.size());
        const size_t n = 1 + r.below(std::min<size_t>(b.size() - at, 64));
        b.erase(b.begin() + ptrdiff_t(at), b.begin() + ptrdiff_t(at + n));
        break;
      }
      case 6: {  // duplicate a run somewhere else
        if (b.empty()) break;
        const size_t at = r.below(b.size());
        const size_t n = 1 + r.below(std::min<size_t>(b.size() - at, 256));
        std::vector<uint8_t> run(b.begin() + ptrdiff_t(at), b.begin() + ptrdiff_t(at + n));
        b.insert(b.begin() + ptrdiff_t(r.below(b.size() + 1)), run.begin(), run.end());
        break;
      }
      case 7: {  // splice: our head, another input's tail
        const auto& o = corpus[r.below(corpus.size())];
        const size_t cut = r.below(b.size() + 1), from = r.below(o.size() + 1);
        b.resize(cut);
        b.insert(b.end(), o.begin() + ptrdiff_t(from), o.end());
        break;
      }
      case 8:  // truncate
        b.resize(r.below(b.size() + 1));
        break;
      case 9: {  // copy a run over another place (shifts fields inside records)
        if (b.size() < 2) break;
        const size_t from = r.below(b.size()), to = r.below(b.size());
        const size_t n = 1 + r.below(std::min(b.size() - from, b.size() - to));
        std::memmove(&b[to], &b[from], n);
        break;
      }
    }
    if (b.size() > max_len) b.resize(max_len);
  }
}

bool parse_u64(const char* s, uint64_t* v) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return false;
  *v = x;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t iterations = 0, seconds = 0, seed = 1, max_len = 1 << 16;
  bool mutating = false;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    uint64_t* target = a == "--mutate"    ? &iterations
                       : a == "--seconds" ? &seconds
                       : a == "--seed"    ? &seed
                       : a == "--max-len" ? &max_len
                                          : nullptr;
    if (target == nullptr) {
      dirs.push_back(a);
      continue;
    }
    if (i + 1 >= argc || !parse_u64(argv[i + 1], target)) {
      std::fprintf(stderr, "fuzz: %s needs a whole number\n", a.c_str());
      return 2;
    }
    mutating |= a == "--mutate";
    ++i;
  }
  if (mutating && (iterations == 0 || seconds == 0 || max_len == 0)) {
    std::fprintf(stderr, "fuzz: --mutate needs --seconds, and both must be above 0\n");
    return 2;
  }

  std::vector<std::vector<uint8_t>> corpus;
  for (const std::string& d : dirs) {
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(d, ec)) {
      if (!e.is_regular_file()) continue;
      std::ifstream f(e.path(), std::ios::binary);
      corpus.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    if (ec) {
      std::fprintf(stderr, "fuzz: cannot read %s: %s\n", d.c_str(), ec.message().c_str());
      return 2;
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "fuzz: the corpus is empty, so nothing was tested\n");
    return 1;
  }

  const std::string target = std::filesystem::path(argv[0]).filename().string();
  for (int s : {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP}) ::signal(s, on_crash);
  auto run = [&](const std::vector<uint8_t>& in, uint64_t iteration) {
    std::snprintf(g_crash_path, sizeof g_crash_path, "crash-%s-%llu-%llu", target.c_str(),
                  (unsigned long long)seed, (unsigned long long)iteration);
    g_cur = in.data();
    g_cur_len = in.size();
    LLVMFuzzerTestOneInput(in.data(), in.size());
  };
  for (size_t i = 0; i < corpus.size(); ++i) run(corpus[i], 0);
  std::printf("replayed %zu inputs\n", corpus.size());
  if (!mutating) return 0;

  Rng rng{seed};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  uint64_t done = 0;
  std::vector<uint8_t> in;
  for (; done < iterations; ++done) {
    if ((done & 63) == 0 && std::chrono::steady_clock::now() >= deadline) break;
    in = corpus[rng.below(corpus.size())];
    mutate(in, corpus, rng, size_t(max_len));
    run(in, done + 1);
  }
  std::printf("ran %llu mutated inputs (seed %llu)\n", (unsigned long long)done,
              (unsigned long long)seed);
  return 0;
}
