#include "runtime/exact/reuse.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "runtime/common/heap.h"
#include "runtime/common/heap_internal.h"
#include "runtime/common/own_thread.h"
#include "runtime/common/runtime_state.h"
#include "runtime/common/spinlock.h"
#include "runtime/exact/reuse_stack.h"

namespace whymiss::rt::reuse {

// ---- memory (reuse_stack.h) ----

void* stack_alloc(size_t bytes) noexcept { return private_alloc_zeroed(bytes); }
void stack_free(void* p, size_t) noexcept { private_free(p); }
void* stack_reserve(size_t bytes) noexcept { return reserve_zeroed(bytes); }

// ---- LruStack's cold paths ----

bool LruStack::init(unsigned line_bits, uint32_t max_lines, unsigned rate_shift,
                    uint32_t first_times) noexcept {
  max_ = max_lines;
  threshold_ = (uint32_t(1) << kHashBits) >> (rate_shift < kHashBits ? rate_shift : kHashBits);
  weight_ = (uint64_t(1) << kHashBits) / threshold_;
  ndir_ = line_bits > kChunkBits ? uint64_t(1) << (line_bits - kChunkBits) : 1;
  dir_ = static_cast<uintptr_t*>(stack_reserve(ndir_ * sizeof(uintptr_t)));
  return dir_ != nullptr && renumber(first_times);
}

uint32_t* LruStack::map_chunk(uint64_t dir_index) noexcept {
  if (nchunks_ == kMaxChunks) return nullptr;
  const size_t bytes = sizeof(uint32_t) << kChunkBits;
  // 2 MiB aligned, so that huge pages can back it (the slack is never touched: no memory).
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  void* raw = stack_reserve(bytes + kHuge);
  if (!raw) return nullptr;
  void* m = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~(kHuge - 1));
  if (huge_) {
    const int saved = errno;  // called from the program's access hooks: its errno stays
    madvise(m, bytes, MADV_HUGEPAGE);
    errno = saved;
  }
  chunk_dir_[nchunks_] = uint32_t(dir_index);
  dir_[dir_index] = reinterpret_cast<uintptr_t>(m) | nchunks_;
  ++nchunks_;
  return static_cast<uint32_t*>(m);
}

// A chunk mapped with small pages, on huge ones from now on: later faults by madvise, the pages
// already there by MADV_COLLAPSE (Linux 6.1; elsewhere they stay small), only in the 2 MiB ranges
// that are at least half resident (collapsing the rest would fill them). A program read at random has touched most
// of its shadow's small pages by the time it reaches kHugeLines lines.
void LruStack::to_huge_pages(uintptr_t chunk) noexcept {
  constexpr size_t kBytes = sizeof(uint32_t) << kChunkBits, kHuge = size_t(2) << 20, kPage = 4096;
  const int saved = errno;
  madvise(reinterpret_cast<void*>(chunk), kBytes, MADV_HUGEPAGE);
  unsigned char resident[kHuge / kPage];
  for (size_t off = 0; off < kBytes; off += kHuge) {
    void* range = reinterpret_cast<void*>(chunk + off);
    if (mincore(range, kHuge, resident) != 0) continue;
    size_t n = 0;
    for (unsigned char r : resident) n += r & 1;
    // At least half resident: collapsing a sparse range would fill it (up to 512x its pages).
    if (n >= kHuge / kPage / 2) madvise(range, kHuge, 25 /* MADV_COLLAPSE */);
  }
  errno = saved;
}

// The markers fill the time arrays: renumber them 1..live, in the same order, into arrays twice
// as long when they took more than half (so that renumbering costs O(1) per access amortised).
// The arrays start short (kMinTimes): rev_ is written at every access and rewritten at every
// renumbering, and arrays far longer than the footprint would sweep the caches the program and
// the simulator need. Out of memory or past max_lines: sample (shrink) until they fit.
void LruStack::out_of_times() noexcept {
  // A large footprint is read at random through its shadow: huge pages where THP allows, as for
  // the simulator's tables (nothing changes if THP is off). Not before: each chunk a small
  // program touches (stack, heap, libraries) would cost a 2 MiB page to clear.
  if (!huge_ && live_ >= kHugeLines) {
    huge_ = true;
    for (uint32_t i = 0; i < nchunks_; ++i) to_huge_pages(dir_[chunk_dir_[i]] & ~uintptr_t(4095));
  }
  if (live_ >= tmax_ / 2 && !renumber(tmax_ * 2)) {
    shrink(tmax_ / 2 - 1);
    return;
  }
  renumber(tmax_);
}

bool LruStack::renumber(uint32_t new_tmax) noexcept {
  const uint32_t new_blocks = new_tmax >> kBlockBits;
  uint64_t* bits = bits_;
  uint32_t* rev = rev_;
  uint32_t* cnt = cnt_;
  int32_t* fen = fen_;
  if (new_tmax != tmax_) {
    bits = static_cast<uint64_t*>(stack_alloc(new_tmax / 8 + 8));
    rev = static_cast<uint32_t*>(stack_alloc(sizeof(uint32_t) * size_t(new_tmax)));
    cnt = static_cast<uint32_t*>(stack_alloc(sizeof(uint32_t) * (new_blocks + kNear + 1)));
    fen = static_cast<int32_t*>(stack_alloc(sizeof(int32_t) * (new_blocks + 1)));
    if (!bits || !rev || !cnt || !fen) {
      for (void* p : {static_cast<void*>(bits), static_cast<void*>(rev), static_cast<void*>(cnt),
                      static_cast<void*>(fen)})
        if (p) stack_free(p, 0);
      return false;
    }
  }
  // In place too: new time k <= old time t, and a word is read whole before any bit lands in it.
  uint32_t k = 1;
  for (uint32_t w = 0; w < tmax_ / 64; ++w) {
    uint64_t v = bits_[w];
    if (bits == bits_) bits_[w] = 0;
    for (; v; v &= v - 1) {
      const uint32_t owner = rev_[w * 64 + __builtin_ctzll(v)];
      *slot_of_owner(owner) = k;
      rev[k] = owner;
      bits[k >> 6] |= uint64_t(1) << (k & 63);
      ++k;
    }
  }
  if (new_tmax != tmax_ && bits_) {
    stack_free(bits_, 0);
    stack_free(rev_, 0);
    stack_free(cnt_, 0);
    stack_free(fen_, 0);
  }
  bits_ = bits;
  rev_ = rev;
  cnt_ = cnt;
  fen_ = fen;
  tmax_ = new_tmax;
  nblocks_ = new_blocks;
  now_ = k;
  // Block counts, and the tree over the closed ones (linear build).
  std::memset(cnt_, 0, sizeof(uint32_t) * (nblocks_ + kNear + 1));
  std::memset(fen_, 0, sizeof(int32_t) * (nblocks_ + 1));
  for (uint32_t b = 0; b < nblocks_; ++b) {
    uint32_t c = 0;
    for (unsigned i = 0; i < kWords; ++i) c += __builtin_popcountll(bits_[b * kWords + i]);
    cnt_[b] = c;
  }
  const uint32_t nb = now_ >> kBlockBits, settled = nb > kNear ? nb - kNear : 0;
  for (uint32_t i = 1; i <= nblocks_; ++i) {
    if (i - 1 < settled) fen_[i] += int32_t(cnt_[i - 1]);
    const uint32_t j = i + (i & -i);
    if (j <= nblocks_) fen_[j] += fen_[i];
  }
  return true;
}

void LruStack::shrink(uint32_t limit) noexcept {
  do {
    threshold_ /= 2;
    for (uint32_t w = 0; w < tmax_ / 64; ++w) {
      for (uint64_t v = bits_[w]; v; v &= v - 1) {
        const uint32_t t = w * 64 + __builtin_ctzll(v);
        const uint32_t owner = rev_[t];
        if (hash_of(line_of_owner(owner)) < threshold_) continue;
        *slot_of_owner(owner) = 0;
        bits_[w] &= ~(uint64_t(1) << (t & 63));
        --live_;
      }
    }
  } while (live_ > limit && threshold_ > 1);
  weight_ = (uint64_t(1) << kHashBits) / threshold_;
  renumber(tmax_);
}

namespace {

// Integer counts (weights are powers of two), converted to the record's doubles at export.
struct Histogram {
  uint64_t cold = 0;
  uint64_t buckets[profile::kReuseBuckets];
  void add(int64_t distance, uint64_t weight) {
    if (distance < 0) cold += weight;
    else buckets[profile::reuse_bucket(uint64_t(distance))] += weight;
  }
};

struct State {
  bool on = false;
  unsigned line_shift = 6;
  unsigned nstacks = 2;  // 3 with the half-line stack
  alignas(64) SpinLock lock;
  LruStack stacks[3];  // line sizes: simulated, twice it, half it
  bool asked[3] = {};  // sampled from the start by a knob
  // The line each stack saw last: its repeat is distance 0 and changes no order (no stack work).
  uint64_t last[3] = {~uint64_t(0), ~uint64_t(0), ~uint64_t(0)};
  Histogram* program = nullptr;  // [3]
  // Instructions with their own histogram: ip -> index (open addressing, first come).
  uint64_t* ips = nullptr;  // ip + 1; 0 = empty
  uint32_t* slots = nullptr;
  Histogram* per_ip = nullptr;
  uint32_t ip_cap = 0, nips = 0, max_ips = 0;
  // The instructions seen lately, direct-mapped (ip + 1 -> its histogram, or none when the table
  // was full at its first access): one compare per access. Replaces a look at the last one only,
  // which a program's interleaved instructions missed on most accesses, each miss a probe whose
  // length the branch predictor could not learn.
  struct Hot {
    uint64_t key = 0;
    Histogram* h = nullptr;
  } hot[64];
  bool popcnt = false;
};
State g;

// The tracker's own thread (Knobs::thread; see reuse.h): the simulating thread appends each
// access as an event to the buffer `head` % kBuffers; full buffers are applied in order, by the
// worker, or by the producer itself when all kBuffers are queued. Buffers are applied under
// g.lock, which orders the stacks' state between the two; `tail` counts the applied ones. What
// the producer writes per access and what the worker writes per event live on host lines of their
// own (sharing one cost the worker a transfer per event: a third of its time).
struct Event {
  uint64_t ip;    // the instruction, with kSwitch / kSpans
  uint64_t half;  // the access's half line
};
struct alignas(64) Feed {  // the producers'
  Event* bufs = nullptr;   // kBuffers * kEvents; null: no worker, access() applies at once
  // Events appended: the next goes to buffer events / kEvents at events % kEvents. One counter,
  // stored after the event, so that an export in a signal handler that interrupted the producer
  // knows exactly which events exist (the full buffers before it, and the partial one).
  uint64_t events = 0;
  std::atomic<uint64_t> head{0};  // buffers published to the worker (events / kEvents, once full)
  pid_t pid = 0;  // the process the worker runs in (a raw fork's child has none)
  bool worker = false;  // a worker thread was started (else the producer applies every buffer)
  SpinLock plock;  // producers, when the simulator runs concurrently
  // Accesses that spanned both halves of their line: each is one more access at half the line
  // (ReuseInfoRecord::extra_accesses), whether or not the half-line stack followed it.
  std::atomic<uint64_t> half_spans{0};
};
struct alignas(64) Drain {  // the worker's (and export's)
  std::atomic<uint64_t> tail{0};
  std::atomic<int> sleeping{0};  // the worker's futex word: 1 while it waits for a buffer
  std::atomic<bool> stop{false};
  std::atomic<bool> busy{false};  // the worker holds g.lock (applying a buffer)
  bool flushed = false;  // export applied the partial buffer (under g.lock)
  bool gave_up = false;  // an export could not get g.lock: the curves are left out
};
Feed g_feed;
Drain g_drain;
constexpr uint32_t kEvents = 4096;  // per buffer: 64 KiB, ~0.1-0.2 ms of the worker's time
constexpr uint32_t kBuffers = 8;
constexpr uint64_t kSwitch = uint64_t(1) << 63;  // a half switch (half_switch): `half` alone
constexpr uint64_t kSpans = uint64_t(1) << 62;   // the access spans both halves of its line

// Producers that run at the same time (the simulator concurrent, no relay: WHYMISS_INTERLEAVE=
// locks, or the relay could not start) each fill a batch of their own and take `plock` once per
// kBatch accesses, not once per access: a lock word written by every thread per access was a
// host-line transfer per access (bench/README.md, "Thread scaling"). A thread's accesses then
// reach the stream in runs of up to kBatch, later than host order by as long as the thread takes
// to make its next ones (a thread that blocks holds up to kBatch - 1 of them until it runs again;
// thread_done() moves them when it exits, the export those of threads still alive). A batch
// belongs to one thread for the process's life (not reused); past kMaxBatches threads, producers
// take the lock per access as before and store g_half.base, as does the tracker without a worker.
constexpr uint32_t kBatch = 64;
constexpr uint32_t kMaxBatches = 1024;
struct alignas(64) Batch {
  std::atomic<uint32_t> n{0};  // stored after the event, as Feed::events (an export reads both)
  Event ev[kBatch];
};
Batch g_batches[kMaxBatches];  // 1 MiB of zero pages, touched only by threads that batch
std::atomic<uint32_t> g_batches_used{0};
constinit thread_local Batch* t_batch __attribute__((tls_model("initial-exec"))) = nullptr;
Batch* const kNoBatch = reinterpret_cast<Batch*>(uintptr_t(1));  // the pool ran out

__attribute__((noinline)) Histogram* histogram_lookup(uint64_t ip) {
  Histogram* h = nullptr;
  uint32_t i = uint32_t((ip * 0x9E3779B97F4A7C15ull) >> 40) & (g.ip_cap - 1);
  for (; g.ips[i] != 0; i = (i + 1) & (g.ip_cap - 1))
    if (g.ips[i] == ip + 1) {
      h = &g.per_ip[g.slots[i]];
      break;
    }
  if (!h && g.nips < g.max_ips) {
    g.ips[i] = ip + 1;
    g.slots[i] = g.nips;
    h = &g.per_ip[g.nips++];
  }
  return h;
}

inline Histogram* histogram_of(uint64_t ip) {
  State::Hot& c = g.hot[(ip * 0x9E3779B97F4A7C15ull) >> 58];
  if (__builtin_expect(c.key == ip + 1, 1)) return c.h;
  c.key = ip + 1;
  c.h = histogram_lookup(ip);
  return c.h;
}

template <typename T>
T* alloc_zeroed(size_t n) {
  return static_cast<T*>(stack_alloc(sizeof(T) * n));
}

// A sampled stack's distance stands for 1/rate as many lines.
inline int64_t scaled(int64_t d, const LruStack& s) {
  return d > 0 ? d * int64_t(s.weight()) : d;
}

// One access to `line` of stack i, for the program's histogram only.
__attribute__((always_inline)) inline void track_program(unsigned i, uint64_t line) {
  LruStack& s = g.stacks[i];
  if (line != g.last[i] || (s.sampling() && !s.follows(line))) {
    const int64_t d = s.access(line);
    g.last[i] = d != LruStack::kNotFollowed ? line : ~uint64_t(0);
    if (d != LruStack::kNotFollowed) g.program[i].add(scaled(d, s), s.weight());
  } else {
    g.program[i].add(0, s.weight());
  }
}

// The tracker's work for one access, given its half line (address >> (line_shift - 1)); inlined
// twice, with and without the popcnt instruction (the runtime is built for baseline x86-64;
// start() picks one).
__attribute__((always_inline)) inline void track(uint64_t ip, uint64_t half) {
  const uint64_t line = half >> 1;
  // (last[] holds followed lines only, and a shrink may have stopped following it since)
  if (line != g.last[0] || (g.stacks[0].sampling() && !g.stacks[0].follows(line))) {
    int64_t d = g.stacks[0].access(line);
    g.last[0] = d != LruStack::kNotFollowed ? line : ~uint64_t(0);
    if (d != LruStack::kNotFollowed) {
      d = scaled(d, g.stacks[0]);
      const uint64_t w = g.stacks[0].weight();
      g.program[0].add(d, w);
      if (Histogram* h = histogram_of(ip)) h->add(d, w);
    }
  } else {
    g.program[0].add(0, g.stacks[0].weight());
    if (Histogram* h = histogram_of(ip)) h->add(0, g.stacks[0].weight());
  }
  track_program(1, half >> 2);
  if (g.nstacks == 3) track_program(2, half);
}

__attribute__((target("popcnt"), noinline)) void half_popcnt(uint64_t half) { track_program(2, half); }
__attribute__((noinline)) void half_plain(uint64_t half) { track_program(2, half); }

// The half-line stack alone, for one access to `half`; a line the sampling does not follow stops
// at a hash and a compare.
__attribute__((always_inline)) inline void feed_half_with(bool popcnt, uint64_t half) {
  if (g.stacks[2].sampling() && !g.stacks[2].follows(half)) {
    g.last[2] = ~uint64_t(0);
    return;
  }
  if (popcnt) half_popcnt(half);
  else half_plain(half);
}
void feed_half(uint64_t half) { feed_half_with(g.popcnt, half); }

// Sampling (past the memory bound, or asked for): whether no stack follows the access, which
// then stops at a hash and a compare per stack.
inline bool none_follows(uint64_t half, bool spans) {
  const uint64_t line = half >> 1;
  return __builtin_expect(g.stacks[1].sampling(), 0) && !g.stacks[0].follows(line) &&
         !g.stacks[1].follows(line >> 1) &&
         (g.nstacks == 2 || (g.stacks[2].sampling() && !g.stacks[2].follows(half) &&
                             (!spans || !g.stacks[2].follows(half + 1))));
}

// The tracker's work for `n` events in order (the worker's, or the producer's when the buffers
// are all queued, or export's), under `lock`. An access that spans both halves of its line
// spans half and half + 1 (a line holds two halves).
template <bool kPopcnt>
__attribute__((always_inline)) inline void apply_events(const Event* e, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t half = e[i].half;
    if (e[i].ip & kSwitch) {
      feed_half_with(kPopcnt, half);
      continue;
    }
    const bool spans = (e[i].ip & kSpans) != 0;
    if (none_follows(half, spans)) continue;
    track(e[i].ip & ~(kSwitch | kSpans), half);
    if (spans) feed_half_with(kPopcnt, half + 1);
  }
}
__attribute__((target("popcnt"), noinline)) void apply_popcnt(const Event* e, uint32_t n) {
  apply_events<true>(e, n);
}
__attribute__((noinline)) void apply_plain(const Event* e, uint32_t n) { apply_events<false>(e, n); }
#ifdef WHYMISS_REUSE_DUMP
// A debugging build's copy of every event applied, in order, to the file $WHYMISS_MRC_DUMP names
// (created, never replaced), for tests/runtime_heap/reuse_bench.cpp --events: the tracker's work
// on a real program's stream, timed alone. Not in release builds.
int g_dump_fd = -1;
#endif
inline void apply(const Event* e, uint32_t n) {
#ifdef WHYMISS_REUSE_DUMP
  if (g_dump_fd >= 0) {  // (a short write ends the copy; the program's errno is left alone)
    const int saved = errno;
    if (write(g_dump_fd, e, sizeof(Event) * n) != ssize_t(sizeof(Event) * n)) g_dump_fd = -1;
    errno = saved;
  }
#endif
  if (g.popcnt) apply_popcnt(e, n);
  else apply_plain(e, n);
}
inline Event* buffer(uint64_t i) { return g_feed.bufs + (i % kBuffers) * kEvents; }

// Applies queued buffers, oldest first, until at most `keep` of the first `published` remain
// queued. `lock` held.
void apply_queued(uint64_t published, uint64_t keep) {
  for (uint64_t t = g_drain.tail.load(std::memory_order_relaxed); t + keep < published; ++t) {
    apply(buffer(t), kEvents);
    g_drain.tail.store(t + 1, std::memory_order_release);
  }
}

// Wakes the worker if it sleeps (or is about to: its futex wait then returns at once).
inline void wake_worker() {
  if (g_drain.sleeping.exchange(0, std::memory_order_seq_cst) != 0)
    futex(&g_drain.sleeping, FUTEX_WAKE_PRIVATE, 1, nullptr);
}

// The producer filled buffer h - 1: queues it, and makes room for the next one (applying the
// oldest itself when the worker is that far behind: a loaded machine, or a worker that is not
// scheduled; the order stays the program's). In the child of a raw fork (no atfork handler ran:
// the child still records) there is no worker, and g.lock may be held by the parent's: nothing is
// applied there, the buffers are overwritten (that child writes no profile).
__attribute__((noinline)) void publish(uint64_t h) {
  const int saved = errno;  // (a program thread)
  g_feed.head.store(h, std::memory_order_seq_cst);
  if (getpid() == g_feed.pid) {
    // (Woken at every buffer: waking it once 4 waited saved lz4's simulating thread 3 % in wake
    // system calls, but cost zstd -3 -T2, five threads on two vCPUs, 1.5 s of 11: the worker then
    // took a vCPU in longer bursts, which the relay's waits for preempted threads paid for.)
    if (h - g_drain.tail.load(std::memory_order_acquire) >= kBuffers) {
      g.lock.lock();
      apply_queued(h, kBuffers - 1);
      g.lock.unlock();
    } else {
      wake_worker();
    }
  }
  errno = saved;
}

// One event for the worker. Producers are serialised (the relay, a solo owner, one thread, or
// `plock`).
inline void put(uint64_t ip, uint64_t half) {
  const uint64_t n = g_feed.events;
  Event* e = buffer(n / kEvents) + n % kEvents;
  // The buffer's lines were last read by the worker, on another core: each is fetched back for
  // writing well ahead (a store waiting for it cost ~10 ns an event on our VMs). Plain stores, not
  // streaming ones: the producer may be another thread next time (the relay, a solo owner), and
  // their stores must be visible in order without a fence of the previous one's.
  if ((n & 3) == 0) __builtin_prefetch(e + 64, 1);
  // Two 8-byte stores of registers: an Event built on the stack and copied as one 16-byte load
  // cannot be forwarded from its two 8-byte stores (a stall on every access).
  e->ip = ip;
  e->half = half;
  std::atomic_signal_fence(std::memory_order_release);  // the event before the count (a handler's export reads both)
  g_feed.events = n + 1;
  if ((n + 1) % kEvents == 0) publish((n + 1) / kEvents);
}

// Moves a batch's events to the feed. Under plock.
void drain_batch(Batch& b) {
  const uint32_t n = b.n.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; ++i) put(b.ev[i].ip, b.ev[i].half);
  b.n.store(0, std::memory_order_relaxed);
}

// This thread's batch; nullptr when the pool is used up.
inline Batch* own_batch() {
  Batch* b = t_batch;
  if (__builtin_expect(b == nullptr, 0)) {
    const uint32_t i = g_batches_used.fetch_add(1, std::memory_order_relaxed);
    b = t_batch = i < kMaxBatches ? &g_batches[i] : kNoBatch;
  }
  return b == kNoBatch ? nullptr : b;
}


// The worker: applies each buffer as it is queued, and sleeps while none is (woken by
// publish() or an export). Runs with every signal blocked, allocating (the stacks' growth) from
// the runtime's private heap.
thread_local bool t_is_worker = false;
void* worker_main(void*) {
  set_in_runtime(true);
  t_is_worker = true;
  // Named, at the program's own priority even under WHYMISS_RELAY_NICE: niced as well, it let the
  // relay apply its buffers and fewer lock hand-overs came back (bench/README.md, "The relay's
  // priority").
  settle_own_thread("whymiss-mrc", 0);
  for (;;) {
    if (g_drain.tail.load(std::memory_order_acquire) < g_feed.head.load(std::memory_order_acquire)) {
      // `busy` covers the whole hold, the lock's acquisition and release included, so that an
      // export that finds the lock taken and `busy` down knows the holder is not the worker.
      g_drain.busy.store(true, std::memory_order_seq_cst);
      g.lock.lock();
      const uint64_t t = g_drain.tail.load(std::memory_order_relaxed);
      if (t < g_feed.head.load(std::memory_order_acquire)) {
        apply(buffer(t), kEvents);
        g_drain.tail.store(t + 1, std::memory_order_release);
      }
      g.lock.unlock();
      g_drain.busy.store(false, std::memory_order_release);
      continue;
    }
    if (g_drain.stop.load(std::memory_order_acquire)) break;
    g_drain.sleeping.store(1, std::memory_order_seq_cst);
    if (g_drain.tail.load(std::memory_order_seq_cst) >= g_feed.head.load(std::memory_order_seq_cst) &&
        !g_drain.stop.load(std::memory_order_seq_cst))
      futex(&g_drain.sleeping, FUTEX_WAIT_PRIVATE, 1, nullptr);
    g_drain.sleeping.store(0, std::memory_order_relaxed);
  }
  return nullptr;
}

}  // namespace

constinit HalfWatch g_half;
// Every half line by default: exact curves at all three line sizes. Applied inline, that took the
// tracker to 24-35 % of exact mode's CPU time on bench/mrc_accuracy.py's programs, past #16's
// 25 %; on the worker thread (Knobs::thread) the program's wall time grows 2-16 % on them
// (geometric means of four runs; per program up to 27 %, once 47 %, on 0.3-0.4 s programs), its
// CPU time 20-25 % (bench/README.md). One half line in 16 ("sampled") errs by up to 0.40 at
// cliffs.
const char* const kHalfDefault = "all";

void half_knob(const char* env, Knobs* k) noexcept {
  auto known = [](const char* s) {
    return s && (std::strcmp(s, "0") == 0 || std::strcmp(s, "sampled") == 0 || std::strcmp(s, "all") == 0);
  };
  const char* v = known(env) ? env : k->half_rate_shift > 0 ? "sampled" : kHalfDefault;
  if (std::strcmp(v, "0") == 0) k->half = false;
  else if (std::strcmp(v, "sampled") == 0) k->half_rate_shift = kHalfSampledShift;
  else if (std::strcmp(v, "all") == 0) k->half_rate_shift = 0;
}

bool start(unsigned line_shift, const Knobs& k) {
  // (A second start would rebuild the stacks over the first one's state: renumbering read the old
  // arrays' markers and crashed.)
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return false;
#ifdef WHYMISS_REUSE_DUMP
  if (const char* path = getenv("WHYMISS_MRC_DUMP")) {  // (an existing file: no copy)
    const int saved = errno;
    g_dump_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    errno = saved;
  }
#endif
  g.line_shift = line_shift;
  g.max_ips = k.max_instructions;
  g.ip_cap = 1;
  while (g.ip_cap < 2 * k.max_instructions) g.ip_cap <<= 1;
  g.program = alloc_zeroed<Histogram>(3);
  g.ips = alloc_zeroed<uint64_t>(g.ip_cap);
  g.slots = alloc_zeroed<uint32_t>(g.ip_cap);
  g.per_ip = alloc_zeroed<Histogram>(k.max_instructions);
  for (State::Hot& c : g.hot) c = State::Hot{};
  __builtin_cpu_init();
  g.popcnt = __builtin_cpu_supports("popcnt");
  // x86-64 user addresses have 47 bits (48 with the top half's kernel space excluded).
  const unsigned addr_bits = 48;
  g.asked[0] = g.asked[1] = k.rate_shift > 0;
  g.on = g.program && g.ips && g.slots && g.per_ip &&
         g.stacks[0].init(addr_bits - line_shift, k.max_lines, k.rate_shift) &&
         g.stacks[1].init(addr_bits - line_shift - 1, k.max_lines, k.rate_shift);
  // The half-line stack is an extra: without memory for it the other two still run.
  g.nstacks = 2;
  if (g.on && k.half && line_shift >= 3 &&
      g.stacks[2].init(addr_bits - line_shift + 1, k.max_lines, k.half_rate_shift)) {
    g.nstacks = 3;
    g.asked[2] = k.half_rate_shift > 0;
    g_half.mask.store(~((uint64_t(1) << (line_shift - 1)) - 1), std::memory_order_relaxed);
    g_half.base.store(~uint64_t(0) & g_half.mask.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  if (g.on && k.thread) {
    g_feed.bufs = alloc_zeroed<Event>(size_t(kBuffers) * kEvents);
    g_feed.pid = getpid();
    if (g_feed.bufs && k.worker) {
      g_feed.worker = start_own_thread(worker_main);
      if (!g_feed.worker) {
        stack_free(g_feed.bufs, 0);
        g_feed.bufs = nullptr;
      }
    }
  }
  return g.on;
}

bool worker_running() noexcept { return g_feed.worker; }

void access(uint64_t ip, uint64_t addr, uint32_t size, bool concurrent) noexcept {
  if (!g.on) return;
  const uint64_t half = addr >> (g.line_shift - 1), line = half >> 1;
  // The half line of its last byte, when the access spans both halves of its line.
  const uint64_t end_half = size > 1 ? (addr + size - 1) >> (g.line_shift - 1) : half;
  const bool spans = g.nstacks == 3 && end_half != half && (end_half >> 1) == line;
  if (spans) g_feed.half_spans.fetch_add(1, std::memory_order_relaxed);
  const uint64_t base = (spans ? addr + size - 1 : addr) & g_half.mask.load(std::memory_order_relaxed);
  const uint64_t tagged = ip | (spans ? kSpans : 0);
  if (g_feed.bufs) {  // the worker applies it (its sampling test too: the thresholds are its state)
    // Concurrent producers batch (above). `g_half.base` is left alone: only the single-threaded
    // hit path reads it (on_hit), and a store per access from every thread cost a transfer each.
    if (Batch* b = concurrent ? own_batch() : nullptr) {
      const uint32_t n = b->n.load(std::memory_order_relaxed);
      b->ev[n].ip = tagged;
      b->ev[n].half = half;
      b->n.store(n + 1, std::memory_order_release);
      if (n + 1 == kBatch) {
        g_feed.plock.lock();
        drain_batch(*b);
        g_feed.plock.unlock();
      }
      return;
    }
    if (concurrent) g_feed.plock.lock();
    if (g.nstacks == 3) g_half.base.store(base, std::memory_order_relaxed);
    put(tagged, half);
    if (concurrent) g_feed.plock.unlock();
    return;
  }
  // Inline: an access no stack follows stops here, without the lock.
  if (none_follows(half, spans)) {
    if (g.nstacks == 3) g_half.base.store(base, std::memory_order_relaxed);
    return;
  }
  if (concurrent) g.lock.lock();
  if (g.nstacks == 3) g_half.base.store(base, std::memory_order_relaxed);
  const Event ev{tagged, half};
  apply(&ev, 1);
  if (concurrent) g.lock.unlock();
}

void thread_done() noexcept {
  Batch* b = t_batch;
  if (b == nullptr || b == kNoBatch || b->n.load(std::memory_order_relaxed) == 0) return;
  g_feed.plock.lock();
  drain_batch(*b);
  g_feed.plock.unlock();
}

void half_span(uint64_t last) noexcept {
  if (g.nstacks != 3) return;
  g_feed.half_spans.fetch_add(1, std::memory_order_relaxed);
  half_switch(last);
}

void half_switch(uint64_t addr) noexcept {
  if (g.nstacks != 3) return;
  g_half.base.store(addr & g_half.mask.load(std::memory_order_relaxed), std::memory_order_relaxed);
  if (g_feed.bufs) put(kSwitch, addr >> (g.line_shift - 1));
  else feed_half(addr >> (g.line_shift - 1));
}

namespace {

// The tracker's lock for an export. finish() may run in a fatal-signal handler that interrupted
// a thread holding it, or while a thread it gave up waiting for holds it: never wait for long
// (`held` false: leave the curves out). With the worker, the holder is most often the worker
// itself, in the middle of a buffer (a fraction of a millisecond, more on a loaded machine):
// while it is, wait up to a second, yielding; any other holder (this thread, interrupted in
// publish(), or a thread stopped in it) is not waited for. Once held, everything queued and the producer's partial buffer are
// applied (recording has stopped: nobody appends any more, except a thread finish() gave up
// waiting for, whose last events may then be missed or half-applied, as its simulator accesses
// are) and the worker is told to stop. A failed attempt is final: the next export does not wait
// again.
struct ExportLock {
  bool held = false;
  ExportLock() {
    if (g_drain.gave_up) return;
    for (int i = 0; i < 100000 && !(held = g.lock.try_lock()); ++i) __builtin_ia32_pause();
    if (!held && g_feed.bufs && !t_is_worker) {  // (a crash on the worker: it holds the lock)
      const uint64_t until = monotonic_ns() + 1000000000u;
      while (!(held = g.lock.try_lock()) && g_drain.busy.load(std::memory_order_relaxed) && monotonic_ns() < until)
        sched_yield();
    }
    if (!held) {
      g_drain.gave_up = true;
      return;
    }
    if (g_feed.bufs && !g_drain.flushed) {
      const uint64_t n = g_feed.events;
      apply_queued(n / kEvents, 0);
      apply(buffer(n / kEvents), uint32_t(n % kEvents));
      // Then the concurrent producers' batches (each thread's latest events), applied here under g.lock
      // (through put() a full buffer would take it again). Not while plock is held: a batching
      // thread finish() gave up waiting for may be moving its batch, and is not waited for.
      if (g_batches_used.load(std::memory_order_acquire) != 0 && g_feed.plock.try_lock()) {
        const uint32_t used = std::min(g_batches_used.load(std::memory_order_acquire), kMaxBatches);
        for (uint32_t i = 0; i < used; ++i) {
          const uint32_t k = g_batches[i].n.load(std::memory_order_acquire);
          if (k != 0) apply(g_batches[i].ev, k);
          g_batches[i].n.store(0, std::memory_order_relaxed);
        }
        g_feed.plock.unlock();
      }
      g_drain.flushed = true;
      g_drain.stop.store(true, std::memory_order_seq_cst);
      wake_worker();
    }
  }
  ~ExportLock() {
    if (held) g.lock.unlock();
  }
  ExportLock(const ExportLock&) = delete;
  ExportLock& operator=(const ExportLock&) = delete;
};

}  // namespace

size_t record_count() noexcept {
  if (!g.on) return 0;
  ExportLock lock;  // the worker's queue applied first: it may hold instructions not yet seen
  return g.nstacks + g.nips;
}

size_t export_records(profile::ReuseRecord* out, size_t max) noexcept {
  if (!g.on) return 0;
  ExportLock lock;
  if (!lock.held) return 0;
  size_t n = 0;
  auto put = [&](const Histogram& h, uint32_t scope, uint64_t key, unsigned shift, double rate) {
    if (n == max) return;
    profile::ReuseRecord& r = out[n++];
    std::memset(&r, 0, sizeof r);
    r.key = key;
    r.scope = scope;
    r.line_bytes = 1u << shift;
    r.cold = double(h.cold);
    r.rate = rate;
    uint64_t all = h.cold;
    for (int b = 0; b < profile::kReuseBuckets; ++b) {
      r.buckets[b] = double(h.buckets[b]);
      all += h.buckets[b];
    }
    r.weighted = double(all);
  };
  put(g.program[0], profile::kReuseProgram, 0, g.line_shift, g.stacks[0].rate());
  put(g.program[1], profile::kReuseProgram, 0, g.line_shift + 1, g.stacks[1].rate());
  if (g.nstacks == 3) put(g.program[2], profile::kReuseProgram, 0, g.line_shift - 1, g.stacks[2].rate());
  for (uint32_t i = 0; i < g.ip_cap; ++i)
    if (g.ips[i]) put(g.per_ip[g.slots[i]], profile::kReuseInstruction, g.ips[i] - 1, g.line_shift, g.stacks[0].rate());
  return n;
}

size_t info_count() noexcept { return g.on ? g.nstacks : 0; }

size_t export_info(profile::ReuseInfoRecord* out, size_t max) noexcept {
  if (!g.on) return 0;
  ExportLock lock;
  if (!lock.held) return 0;
  const unsigned shifts[3] = {g.line_shift, g.line_shift + 1, g.line_shift - 1};
  size_t n = 0;
  for (unsigned i = 0; i < g.nstacks && n < max; ++i, ++n) {
    const LruStack& s = g.stacks[i];
    profile::ReuseInfoRecord& r = out[n];
    std::memset(&r, 0, sizeof r);
    r.line_bytes = 1u << shifts[i];
    r.how = g.asked[i] ? profile::kReuseSampledAsked
            : s.sampling() ? profile::kReuseSampledBound
                           : profile::kReuseEveryLine;
    r.rate = s.rate();
    r.dropped = s.dropped();
    r.lines = s.live();
    if (i == 2) r.extra_accesses = g_feed.half_spans.load(std::memory_order_relaxed);
  }
  return n;
}

}  // namespace whymiss::rt::reuse
