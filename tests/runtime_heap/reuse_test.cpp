// Exact mode's reuse-distance tracker (src/runtime/exact/reuse_stack.h, reuse.h) against a naive
// LRU stack (a vector, most recent first: a line's distance is its index), access by access, on
// random, cliff-shaped (cyclic sweeps) and hot-set traces, at every line size the tracker follows
// (the simulated one, twice it and half it, for simulated lines of 32, 64 and 128 bytes). The time arrays
// start at their smallest (512 times) so that renumbering and growth happen hundreds of times.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime/exact/reuse.h"
#include "runtime/exact/reuse_stack.h"

namespace whymiss::rt::reuse {
namespace {

struct NaiveStack {
  std::vector<uint64_t> mru;  // most recent first
  int64_t access(uint64_t line) {
    auto it = std::find(mru.begin(), mru.end(), line);
    int64_t d = LruStack::kCold;
    if (it != mru.end()) {
      d = it - mru.begin();
      mru.erase(it);
    }
    mru.insert(mru.begin(), line);
    return d;
  }
};

// Addresses in three regions far apart (a program's image, heap and stack), so that lines land
// in several shadow chunks.
uint64_t address_of(uint64_t i) {
  static const uint64_t bases[3] = {0x555555554000ull, 0x7f3a12000000ull, 0x7ffd8a000000ull};
  return bases[i % 3] + (i / 3) * 64 + (i * 7) % 64;  // (the byte within the line varies)
}

std::vector<uint64_t> random_trace(unsigned lines, unsigned n, uint32_t seed) {
  std::mt19937_64 r(seed);
  std::vector<uint64_t> t;
  for (unsigned i = 0; i < n; ++i) t.push_back(address_of(r() % lines));
  return t;
}
// Sweeps over `lines` lines in order, again and again: every reuse is at distance lines - 1 (a
// miss-ratio curve that falls from 1 to 0 in one step), with sweeps of other lengths between.
std::vector<uint64_t> cliff_trace(unsigned n) {
  std::vector<uint64_t> t;
  const unsigned lengths[] = {700, 700, 700, 33, 33, 1900, 700, 16, 16, 16};
  for (unsigned k = 0; t.size() < n; ++k)
    for (unsigned i = 0; i < lengths[k % 10]; ++i) t.push_back(address_of(i));
  t.resize(n);
  return t;
}
// 80 % of accesses to 16 lines, the rest over 2000: mostly short distances, some far.
std::vector<uint64_t> hot_trace(unsigned n, uint32_t seed) {
  std::mt19937_64 r(seed);
  std::vector<uint64_t> t;
  for (unsigned i = 0; i < n; ++i) t.push_back(address_of(r() % 5 ? r() % 16 : 16 + r() % 2000));
  return t;
}

void expect_same_distances(const std::vector<uint64_t>& trace, unsigned line_shift, const char* what) {
  LruStack s;
  ASSERT_TRUE(s.init(48 - line_shift, 1u << 20, 0, 512));
  NaiveStack naive;
  size_t reuses = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const uint64_t line = trace[i] >> line_shift;
    const int64_t want = naive.access(line), got = s.access(line);
    ASSERT_EQ(got, want) << what << ", line size " << (1u << line_shift) << ", access " << i;
    reuses += want >= 0;
  }
  EXPECT_GT(reuses, trace.size() / 2) << what;
  EXPECT_EQ(s.rate(), 1.0);
  EXPECT_EQ(s.live(), naive.mru.size());
}

TEST(ReuseStack, DistancesEqualANaiveLruStackAtEveryLineSize) {
  const auto random = random_trace(1500, 60000, 1), cliff = cliff_trace(60000), hot = hot_trace(60000, 2);
  for (unsigned shift : {4u, 5u, 6u, 7u, 8u}) {  // 16 (half 32), 32, 64, 128 and (twice 128) 256 bytes
    expect_same_distances(random, shift, "random");
    expect_same_distances(cliff, shift, "cliff");
    expect_same_distances(hot, shift, "hot set");
  }
}

TEST(ReuseStack, OldMarkersSurviveManyRenumberings) {
  // 6000 lines (the time arrays grow to 16 Ki times), then a long phase on 20 of them (about 40
  // renumberings, which move the 5980 others' markers down each time), then all 6000 again:
  // their distances still count every line used since.
  std::vector<uint64_t> trace = random_trace(6000, 40000, 5);
  std::mt19937_64 r(6);
  for (int i = 0; i < 400000; ++i) trace.push_back(address_of(r() % 20));
  const auto again = random_trace(6000, 40000, 7);
  trace.insert(trace.end(), again.begin(), again.end());
  expect_same_distances(trace, 6, "phases");
}

TEST(ReuseStack, CliffDistancesAreTheSweepLength) {
  // Built by construction: a sweep of 700 lines repeated; after the first, every access is a
  // reuse at distance 699. (Independent of the naive stack.)
  LruStack s;
  ASSERT_TRUE(s.init(42, 1u << 20, 0, 512));
  for (int sweep = 0; sweep < 50; ++sweep)
    for (uint64_t i = 0; i < 700; ++i)
      ASSERT_EQ(s.access(0x100000 + i * 3), sweep == 0 ? LruStack::kCold : 699) << sweep << " " << i;
}

TEST(ReuseStack, PastItsBoundItSamplesAndTheFollowedLinesKeepExactDistances) {
  // 4000 lines, at most 500 followed: the stack halves its rate until they fit. From then on,
  // a followed access's distance is its distance among the followed lines (SHARDS: the caller
  // scales it by 1/rate).
  const auto trace = random_trace(4000, 80000, 3);
  LruStack s;
  ASSERT_TRUE(s.init(42, 500, 0, 512));
  std::vector<int64_t> got;
  for (uint64_t a : trace) got.push_back(s.access(a >> 6));
  ASSERT_LT(s.rate(), 0.2);
  EXPECT_LE(s.live(), 500u);
  // The last threshold was reached before the trace's second half (4000 lines * rate <= 500).
  NaiveStack naive;
  size_t checked = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const uint64_t line = trace[i] >> 6;
    if (!s.follows(line)) {
      if (i >= trace.size() / 2) {
        ASSERT_EQ(got[i], LruStack::kNotFollowed) << i;
      }
      continue;
    }
    const int64_t want = naive.access(line);
    if (i >= trace.size() / 2) {
      ASSERT_EQ(got[i], want) << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000u);
  EXPECT_EQ(s.live(), naive.mru.size());  // the dropped lines left no marker behind
}

TEST(ReuseStack, LinesBeyondTheAddressSpaceAreDroppedAndCounted) {
  // 48-bit addresses at 64-byte lines: line numbers have 42 bits. One past them has no shadow
  // slot: the access is not followed, counted, and leaves the other lines' distances alone.
  LruStack s;
  ASSERT_TRUE(s.init(42, 1u << 20, 0, 512));
  EXPECT_EQ(s.access(7), LruStack::kCold);
  EXPECT_EQ(s.access(uint64_t(1) << 42), LruStack::kNotFollowed);
  EXPECT_EQ(s.dropped(), 1u);
  EXPECT_EQ(s.access(8), LruStack::kCold);
  EXPECT_EQ(s.access(7), 1);
  EXPECT_EQ(s.access((uint64_t(1) << 42) - 1), LruStack::kCold);  // the last line that has one
}

// A trace as the tracker meets it behind exact mode's hit path: each address of `t` followed by
// 0-3 more accesses to the same 64-byte line at other bytes (either half), which the hit path
// takes itself.
std::vector<uint64_t> with_runs(const std::vector<uint64_t>& t, uint32_t seed) {
  std::mt19937_64 r(seed);
  std::vector<uint64_t> out;
  for (uint64_t a : t) {
    out.push_back(a);
    for (unsigned k = r() % 4; k > 0; --k) out.push_back((a & ~uint64_t(63)) + r() % 64);
  }
  return out;
}

// Built four times (tests/runtime_heap/CMakeLists.txt): accesses applied inline; on the tracker's
// worker thread (Knobs::thread); queued with no worker, so the producer applies each buffer once
// all are queued (Knobs::worker false); and both ways with every stack sampled (one line in 16,
// as WHYMISS_MRC=sampled), against naive stacks over the followed lines only.
#if defined(WHYMISS_REUSE_TEST_WORKER) || defined(WHYMISS_REUSE_TEST_QUEUE)
constexpr bool kQueued = true;
#else
constexpr bool kQueued = false;
#endif
#ifdef WHYMISS_REUSE_TEST_WORKER
constexpr bool kWorker = true;
#else
constexpr bool kWorker = false;
#endif
#ifdef WHYMISS_REUSE_TEST_SAMPLED
constexpr unsigned kRateShift = 4;
#else
constexpr unsigned kRateShift = 0;
#endif

// Starts the tracker at 64-byte lines as this build's variant runs it.
bool start_variant() {
  Knobs k;
  k.thread = kQueued;
  k.worker = kWorker;
  k.rate_shift = k.half_rate_shift = kRateShift;
  return start(6, k);
}
// The tracker starts once per process: ctest runs each test in a process of its own; run
// directly, the binary runs its first test and skips the others (a second start() is refused).
bool g_started = false;
#define START_VARIANT()                                                                        \
  do {                                                                                         \
    if (g_started) GTEST_SKIP() << "the tracker starts once per process: run one test per "     \
                                   "process (ctest does; or --gtest_filter)";                  \
    g_started = true;                                                                          \
    ASSERT_TRUE(start_variant());                                                              \
    ASSERT_FALSE(start_variant()) << "a second start() must be refused";                       \
  } while (0)
// Sampled: a line is followed when its hash is under the threshold; each followed access stands
// for kWeight accesses.
constexpr double kWeight = double(uint32_t(1) << kRateShift);
bool follows(uint64_t line) {
  return LruStack::hash_of(line) < ((uint32_t(1) << LruStack::kHashBits) >> kRateShift);
}

TEST(ReuseTracker, HistogramsMatchNaiveStacksAtAllThreeLineSizes) {
  // The whole tracker (reuse.h) at 64-byte lines: the program's histograms at 64, 128 and 32
  // bytes and one instruction's equal those of naive stacks over the same accesses (repeats of
  // the previous line included: distance 0). An access to the previous access's 64-byte line goes
  // to on_hit() instead of access(), as exact mode's hit path does: at 64 and 128 bytes it is a
  // distance-0 reuse the analysis adds from the totals (no histogram entry); at 32 bytes it is in
  // the histogram, with its distance, whenever it changes halves, and a distance-0 repeat (no
  // entry) otherwise.
  START_VARIANT();
  ASSERT_EQ(worker_running(), kWorker);
  // A followed access's distance (in followed lines) is scaled as its weight is.
  const double w = kWeight;
  auto add = [w](std::vector<double>& h, double& cold, int64_t d) {
    if (d < 0) cold += w;
    else h[profile::reuse_bucket(uint64_t(d) << kRateShift)] += w;
  };
  NaiveStack n64, n128, n32;
  std::vector<double> h64(profile::kReuseBuckets), h128(profile::kReuseBuckets), h32(profile::kReuseBuckets),
      hip(profile::kReuseBuckets);
  double cold64 = 0, cold128 = 0, cold32 = 0, coldip = 0;
  auto trace = hot_trace(40000, 4);
  const auto cliff = cliff_trace(20000);
  trace.insert(trace.end(), cliff.begin(), cliff.end());
  trace = with_runs(trace, 5);
  size_t hits = 0, switches = 0;
  uint64_t prev = ~uint64_t(0);
  // The last accesses come from an instruction seen nowhere before: with the worker they are in
  // its partial buffer at export, and must still get their histogram (record_count() included).
  const size_t late_from = trace.size() - (kRateShift ? 400 : 10);
  double late = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const uint64_t ip = i >= late_from ? 0x402000 : 0x401000 + (i % 3) * 4, a = trace[i];
    const bool hit = prev != ~uint64_t(0) && (a >> 6) == (prev >> 6);
    const bool same_half = prev != ~uint64_t(0) && (a >> 5) == (prev >> 5);
    prev = a;
    if (hit) on_hit(a, 1);
    else access(ip, a, 1, false);
    hits += hit;
    switches += hit && !same_half;
    if (!hit && follows(a >> 6)) {
      const int64_t d64 = n64.access(a >> 6);
      add(h64, cold64, d64);
      if (ip == 0x401000) add(hip, coldip, d64);
      if (ip == 0x402000) late += w;
    }
    if (!hit && follows(a >> 7)) add(h128, cold128, n128.access(a >> 7));
    if (!(hit && same_half) && follows(a >> 5)) add(h32, cold32, n32.access(a >> 5));
  }
  EXPECT_GT(hits, trace.size() / 3);  // the runs: 1.5 more accesses per address on average
  EXPECT_GT(switches, hits / 3);      // about half of them change halves
  std::vector<profile::ReuseRecord> recs(record_count());
  ASSERT_GT(late, 0);
  ASSERT_EQ(recs.size(), 3u + 4u);
  ASSERT_EQ(export_records(recs.data(), recs.size()), recs.size());
  int seen = 0;
  for (const auto& r : recs) {
    if (r.scope == profile::kReuseInstruction && r.key == 0x402000) {
      EXPECT_EQ(r.weighted, late);
      ++seen;
      continue;
    }
    const std::vector<double>* want = nullptr;
    double cold = 0;
    if (r.scope == profile::kReuseProgram && r.line_bytes == 64) want = &h64, cold = cold64;
    if (r.scope == profile::kReuseProgram && r.line_bytes == 128) want = &h128, cold = cold128;
    if (r.scope == profile::kReuseProgram && r.line_bytes == 32) want = &h32, cold = cold32;
    if (r.scope == profile::kReuseInstruction && r.key == 0x401000) want = &hip, cold = coldip;
    if (!want) continue;
    ++seen;
    EXPECT_EQ(r.rate, 1.0 / w);
    EXPECT_EQ(r.cold, cold) << r.line_bytes;
    for (int b = 0; b < profile::kReuseBuckets; ++b)
      ASSERT_EQ(r.buckets[b], (*want)[b]) << "scope " << r.scope << ", line " << r.line_bytes << ", bucket " << b;
  }
  EXPECT_EQ(seen, 5);
  // How each was obtained: every line followed, nothing dropped, as many lines as the naive
  // stacks hold.
  std::vector<profile::ReuseInfoRecord> info(info_count());
  ASSERT_EQ(info.size(), 3u);
  ASSERT_EQ(export_info(info.data(), info.size()), 3u);
  const uint32_t lines[3] = {64, 128, 32};
  const size_t live[3] = {n64.mru.size(), n128.mru.size(), n32.mru.size()};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(info[i].line_bytes, lines[i]);
    EXPECT_EQ(info[i].how, kRateShift ? profile::kReuseSampledAsked : profile::kReuseEveryLine);
    EXPECT_EQ(info[i].rate, 1.0 / w);
    EXPECT_EQ(info[i].dropped, 0u);
    EXPECT_EQ(info[i].lines, live[i]) << lines[i];
  }
}

TEST(ReuseTracker, ConcurrentProducersHaveEveryAccessInTheCurves) {
  // Threads calling access() at the same time (exact mode without the relay) batch their events
  // per thread; the export must still hold every access once: four threads, each on lines of its
  // own, a count that leaves a partial batch behind, all exited before the export.
  START_VARIANT();
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 10007, kLines = 300;  // 10007 = 156 x 64 + 23
  const double w = kWeight;
  auto line_of = [](int t, uint64_t i) { return (uint64_t(t + 1) << 20) + (i * 7) % kLines; };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &line_of] {
      for (uint64_t i = 0; i < kPerThread; ++i) access(0x401000 + t * 4, line_of(t, i) << 6, 8, true);
    });
  for (auto& th : threads) th.join();
  double want_all = 0, want_cold = 0, want_ip[kThreads] = {};
  for (int t = 0; t < kThreads; ++t) {
    std::vector<bool> seen(kLines);
    for (uint64_t i = 0; i < kPerThread; ++i) {
      const uint64_t line = line_of(t, i);
      if (!follows(line)) continue;
      want_all += w, want_ip[t] += w;
      if (!seen[line % kLines]) seen[line % kLines] = true, want_cold += w;
    }
  }
  std::vector<profile::ReuseRecord> recs(record_count());
  ASSERT_EQ(export_records(recs.data(), recs.size()), recs.size());
  int checked = 0;
  for (const auto& r : recs) {
    if (r.scope == profile::kReuseProgram && r.line_bytes == 64) {
      EXPECT_EQ(r.weighted, want_all);
      EXPECT_EQ(r.cold, want_cold);
      ++checked;
    }
    if (r.scope == profile::kReuseInstruction && r.key >= 0x401000 && r.key < 0x401000 + 4 * kThreads) {
      EXPECT_EQ(r.weighted, want_ip[(r.key - 0x401000) / 4]) << std::hex << r.key;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1 + kThreads);
}

TEST(ReuseTracker, AccessesThroughABatchKeepTheirOrder) {
  // One thread feeding the tracker as a concurrent producer (its accesses go through its batch
  // when the worker runs; inline, through the lock): the histograms equal a naive stack's over
  // the same accesses in the same order, bucket by bucket, also across buffer boundaries and with
  // a partial batch at the export.
  START_VARIANT();
  const double w = kWeight;
  auto trace = hot_trace(40000, 4);
  const auto cliff = cliff_trace(20000);
  trace.insert(trace.end(), cliff.begin(), cliff.end());
  trace.resize(trace.size() - trace.size() % 64 + 37);  // a partial batch is left
  NaiveStack n64, n128;
  std::vector<double> h64(profile::kReuseBuckets), h128(profile::kReuseBuckets);
  double cold64 = 0, cold128 = 0;
  for (uint64_t a : trace) {
    access(0x401000, a, 1, true);
    for (auto [n, h, cold, shift] : {std::tuple{&n64, &h64, &cold64, 6u}, std::tuple{&n128, &h128, &cold128, 7u}}) {
      if (!follows(a >> shift)) continue;
      const int64_t d = n->access(a >> shift);
      if (d < 0) *cold += w;
      else (*h)[profile::reuse_bucket(uint64_t(d) << kRateShift)] += w;
    }
  }
  std::vector<profile::ReuseRecord> recs(record_count());
  ASSERT_EQ(export_records(recs.data(), recs.size()), recs.size());
  int seen = 0;
  for (const auto& r : recs) {
    if (r.scope != profile::kReuseProgram || (r.line_bytes != 64 && r.line_bytes != 128)) continue;
    const auto& want = r.line_bytes == 64 ? h64 : h128;
    EXPECT_EQ(r.cold, r.line_bytes == 64 ? cold64 : cold128);
    for (int b = 0; b < profile::kReuseBuckets; ++b)
      ASSERT_EQ(r.buckets[b], want[b]) << "line " << r.line_bytes << ", bucket " << b;
    ++seen;
  }
  EXPECT_EQ(seen, 2);
}

TEST(ReuseTracker, HalfLineKnobWords) {
  // WHYMISS_MRC_HALF: "all", "sampled", "0"; anything else is the default, and WHYMISS_MRC=sampled
  // (both rates set) samples the half line too unless the knob says "all".
  auto knobs = [](const char* env, unsigned rate_shift) {
    Knobs k;
    k.rate_shift = k.half_rate_shift = rate_shift;
    half_knob(env, &k);
    return k;
  };
  EXPECT_TRUE(knobs("all", 0).half);
  EXPECT_EQ(knobs("all", 0).half_rate_shift, 0u);
  EXPECT_EQ(knobs("all", 4).half_rate_shift, 0u);
  EXPECT_EQ(knobs("sampled", 0).half_rate_shift, kHalfSampledShift);
  EXPECT_FALSE(knobs("0", 0).half);
  EXPECT_EQ(knobs(nullptr, 4).half_rate_shift, kHalfSampledShift);
  const unsigned def = std::string(kHalfDefault) == "sampled" ? kHalfSampledShift : 0;
  EXPECT_EQ(knobs(nullptr, 0).half_rate_shift, def);
  EXPECT_EQ(knobs("bogus", 0).half_rate_shift, def);
  EXPECT_TRUE(knobs("bogus", 0).half);
}

}  // namespace
}  // namespace whymiss::rt::reuse
