// Tests of the runtime's heap subsystem (src/runtime/common): private heap, object store,
// allocation sites and the malloc / operator new interposition. The test binary links the
// interposing allocator into itself (as an instrumented program does), with the runtime core
// replaced by runtime_stub.cpp; recording is on, so GoogleTest's own allocations are recorded too.
#include "runtime/common/heap.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "runtime/common/heap_internal.h"
#include "runtime_stub.h"

namespace rt = whymiss::rt;
using whymiss::profile::kNoSite;

namespace {

// Hides a pointer from the optimiser so malloc/free pairs are not elided.
template <typename T>
T* opaque(T* p) {
  __asm__ volatile("" : "+r"(p) : : "memory");
  return p;
}

void* opaque_malloc(size_t n) {
  return opaque(malloc(n));
}

// A size the compiler cannot see (keeps -Walloc-size-larger-than quiet about deliberate failures).
size_t opaque_size(size_t n) {
  __asm__ volatile("" : "+r"(n));
  return n;
}

void copy_object(rt::HeapObject& o, void* arg) {
  *static_cast<rt::HeapObject*>(arg) = o;
}

// The live object containing addr, if any.
bool lookup(const void* addr, rt::HeapObject* out) {
  return rt::with_object(reinterpret_cast<uintptr_t>(addr), copy_object, out);
}

// Expects a live object [p, p+size) to be found from its first, middle and last byte.
void expect_object(const void* p, size_t size) {
  const auto base = reinterpret_cast<uintptr_t>(p);
  for (uintptr_t a : {base, base + size / 2, base + size - 1}) {
    rt::HeapObject o{};
    ASSERT_TRUE(rt::with_object(a, copy_object, &o)) << std::hex << a;
    EXPECT_EQ(o.start, base);
    EXPECT_EQ(o.size, size);
  }
}

// True when no live object with this serial contains addr.
bool gone(const void* p, uint64_t serial) {
  rt::HeapObject o{};
  return !lookup(p, &o) || o.serial != serial;
}

struct InRuntime {
  InRuntime() { rt::test_set_in_runtime(true); }
  ~InRuntime() { rt::test_set_in_runtime(false); }
};

// ---------------------------------------------------------------------------------------------
// Private heap

TEST(PrivateHeap, AllocFreeReuseAndIsPrivate) {
  std::vector<void*> blocks;
  for (size_t size : {size_t{0}, size_t{1}, size_t{16}, size_t{17}, size_t{100}, size_t{4096},
                      size_t{65537}, size_t{1} << 20}) {
    void* p = rt::private_alloc(size);
    ASSERT_NE(p, nullptr) << size;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
    EXPECT_TRUE(rt::is_private(p));
    EXPECT_TRUE(rt::is_private(static_cast<char*>(p) + (size > 0 ? size - 1 : 0)));
    EXPECT_GE(rt::private_usable_size(p), size);
    memset(p, 0xab, size);
    blocks.push_back(p);
  }
  EXPECT_GT(rt::private_region_size(), size_t{0});
  // LIFO reuse within a size class.
  void* a = rt::private_alloc(48);
  rt::private_free(a);
  EXPECT_EQ(rt::private_alloc(40), a);
  rt::private_free(a);
  for (void* p : blocks) rt::private_free(p);
  // Program memory, stack and globals are not private.
  void* g = opaque_malloc(32);
  int local = 0;
  EXPECT_FALSE(rt::is_private(g));
  EXPECT_FALSE(rt::is_private(&local));
  EXPECT_FALSE(rt::is_private(&blocks));
  EXPECT_FALSE(rt::is_private(nullptr));
  free(g);
}

TEST(PrivateHeap, BigBlocksAndAlignment) {
  const size_t big = (size_t{3} << 20) + 5;
  void* p = rt::private_alloc(big);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(rt::is_private(p));
  EXPECT_GE(rt::private_usable_size(p), big);
  memset(p, 1, big);
  rt::private_free(p);
  void* q = rt::private_alloc(big);  // the freed extent is reused
  EXPECT_EQ(q, p);
  EXPECT_EQ(static_cast<unsigned char*>(q)[12345], 0);  // pages were released (MADV_DONTNEED)
  rt::private_free(q);
  for (size_t align :
       {size_t{32}, size_t{64}, size_t{4096}, size_t{1} << 16, size_t{1} << 20, size_t{1} << 22}) {
    for (size_t size : {size_t{1}, size_t{100}, size_t{3} << 20}) {
      void* r = rt::private_alloc_aligned(size, align);
      ASSERT_NE(r, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % align, 0u) << align << " " << size;
      memset(r, 2, size);
      rt::private_free(r);
    }
  }
  void* r = rt::private_alloc(100);
  void* r2 = rt::private_realloc(r, 5000);
  ASSERT_NE(r2, nullptr);
  EXPECT_GE(rt::private_usable_size(r2), 5000u);
  rt::private_free(r2);
}

TEST(PrivateHeap, ConcurrentUse) {
  std::atomic<int> errors{0};
  auto worker = [&](int seed) {
    std::mt19937 rng(seed);
    std::vector<std::pair<unsigned char*, size_t>> live;
    for (int i = 0; i < 100000; ++i) {
      if (live.size() < 200 && (live.empty() || rng() % 2 == 0)) {
        const size_t size = 1 + rng() % (rng() % 16 == 0 ? 200000 : 300);
        auto* p = static_cast<unsigned char*>(rt::private_alloc(size));
        if (p == nullptr) {
          ++errors;
          continue;
        }
        memset(p, static_cast<int>(size & 0xff), size);
        live.emplace_back(p, size);
      } else {
        const size_t k = rng() % live.size();
        auto [p, size] = live[k];
        if (p[0] != (size & 0xff) || p[size - 1] != (size & 0xff)) ++errors;
        rt::private_free(p);
        live[k] = live.back();
        live.pop_back();
      }
    }
    for (auto [p, size] : live) rt::private_free(p);
  };
  // The workers' own std::vector allocations go to the program heap; that is fine.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t + 1);
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
}

TEST(PrivateHeap, RuntimeAllocationsArePrivateAndUnrecorded) {
  const uint64_t before = rt::dropped_objects();
  void* p;
  void* c;
  std::vector<int>* v;
  {
    InRuntime in;
    p = opaque_malloc(100);
    c = opaque(calloc(10, 10));
    v = new std::vector<int>(1000, 7);  // the simulator's containers take this path
  }
  EXPECT_TRUE(rt::is_private(p));
  EXPECT_TRUE(rt::is_private(c));
  EXPECT_TRUE(rt::is_private(v));
  EXPECT_TRUE(rt::is_private(v->data()));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(static_cast<unsigned char*>(c)[i], 0);
  rt::HeapObject o{};
  EXPECT_FALSE(lookup(p, &o));
  EXPECT_FALSE(lookup(v->data(), &o));
  // Resizing keeps the contents.
  {
    InRuntime in;
    memset(p, 0x5a, 100);
    p = opaque(realloc(p, 5000));
    ASSERT_TRUE(rt::is_private(p));
    for (int i = 0; i < 100; ++i) ASSERT_EQ(static_cast<unsigned char*>(p)[i], 0x5a);
  }
  // Freed from outside the runtime: routed back to the private heap by address.
  free(p);
  free(c);
  delete v;
  EXPECT_EQ(rt::dropped_objects(), before);
}

// The runtime's calloc of a big block (the simulator's entries and LRU stamps): zero, also when
// the block reuses a freed one the runtime wrote, and without its pages being written (a table
// a program barely uses must cost only what it uses; issue #19, item 13).
TEST(PrivateHeap, BigCallocIsZeroAndLeavesPagesUntouched) {
  const size_t big = size_t{64} << 20;
  auto resident = [](void* p, size_t n) {
    std::vector<unsigned char> v((n + 4095) / 4096);
    if (mincore(p, n, v.data()) != 0) return size_t{0};
    size_t r = 0;
    for (unsigned char b : v) r += b & 1;
    return r * 4096;
  };
  unsigned char* a;
  {
    InRuntime in;
    a = static_cast<unsigned char*>(opaque(calloc(1, big)));
  }
  ASSERT_TRUE(rt::is_private(a));
  EXPECT_LT(resident(a, big), big / 8) << "calloc wrote the block's pages";
  memset(opaque(a), 0xa5, big);
  free(a);
  unsigned char* b;
  {
    InRuntime in;
    b = static_cast<unsigned char*>(opaque(calloc(big / 16, 16)));
  }
  ASSERT_TRUE(rt::is_private(b));
  EXPECT_EQ(b, a);  // the freed extent, reused
  for (size_t i = 0; i < big; i += 4093) ASSERT_EQ(b[i], 0) << "at " << i;
  free(b);
}

// ---------------------------------------------------------------------------------------------
// Object store

TEST(ObjectStore, RegisterLookupFree) {
  auto* p = static_cast<char*>(opaque_malloc(100));
  expect_object(p, 100);
  rt::HeapObject o{};
  ASSERT_TRUE(lookup(p + 42, &o));
  EXPECT_GT(o.serial, 0u);
  EXPECT_EQ(o.alloc_thread, rt::current_thread_index());
  EXPECT_NE(o.site, kNoSite);
  for (uint64_t m : o.misses) EXPECT_EQ(m, 0u);
  EXPECT_EQ(o.thread_mask, 0u);
  EXPECT_EQ(o.l1_set_mask, 0u);
  rt::HeapObject after{};
  EXPECT_FALSE(lookup(p + 100, &after) && after.serial == o.serial);  // one past the end
  const uint64_t serial = o.serial;
  free(opaque(p));
  EXPECT_TRUE(gone(p, serial));
  EXPECT_TRUE(gone(p + 50, serial));
  // A second object gets a larger serial.
  void* q = opaque_malloc(100);
  ASSERT_TRUE(lookup(q, &o));
  EXPECT_GT(o.serial, serial);
  free(q);
}

TEST(ObjectStore, ZeroSizeAndNull) {
  void* p = opaque_malloc(0);
  ASSERT_NE(p, nullptr);
  free(p);
  free(nullptr);
  void* r = opaque(realloc(nullptr, 0));
  free(r);
  EXPECT_EQ(opaque(realloc(opaque_malloc(10), 0)), nullptr);  // glibc: frees, returns null
}

TEST(ObjectStore, ObjectsOverlapping) {
  std::vector<char*> objs;
  for (int i = 0; i < 20; ++i) objs.push_back(static_cast<char*>(opaque_malloc(40)));
  std::vector<uint64_t> serials;
  for (char* p : objs) {
    rt::HeapObject o{};
    ASSERT_TRUE(lookup(p, &o));
    serials.push_back(o.serial);
  }
  for (char* p : objs) {
    rt::HeapObject out[4];
    const auto a = reinterpret_cast<uintptr_t>(p);
    ASSERT_GE(rt::objects_overlapping(a + 10, a + 11, out, 4), 1);
    EXPECT_EQ(out[0].start, a);
    // A range ending at the object's first byte does not overlap it.
    const int n = rt::objects_overlapping(a - 8, a, out, 4);
    for (int i = 0; i < n && i < 4; ++i) EXPECT_NE(out[i].start, a);
  }
  // One range over all of them: each reported exactly once; max truncates the copy only.
  uintptr_t lo = ~uintptr_t{0}, hi = 0;
  for (char* p : objs) {
    lo = std::min(lo, reinterpret_cast<uintptr_t>(p));
    hi = std::max(hi, reinterpret_cast<uintptr_t>(p) + 40);
  }
  std::vector<rt::HeapObject> out(4096);
  const int n = rt::objects_overlapping(lo, hi, out.data(), static_cast<int>(out.size()));
  ASSERT_LE(n, static_cast<int>(out.size()));
  for (uint64_t s : serials) {
    int seen = 0;
    for (int i = 0; i < n; ++i) seen += out[i].serial == s;
    EXPECT_EQ(seen, 1);
  }
  rt::HeapObject few[2];
  EXPECT_EQ(rt::objects_overlapping(lo, hi, few, 2), n);
  for (char* p : objs) free(p);
}

TEST(ObjectStore, ObjectsCrossingPagesAndChunks) {
  for (size_t size :
       {size_t{5000}, size_t{70000}, size_t{300000}, size_t{3} << 20, size_t{40} << 20}) {
    auto* p = static_cast<char*>(opaque_malloc(size));
    ASSERT_NE(p, nullptr);
    expect_object(p, size);
    // Every page of it.
    for (size_t off = 0; off < size; off += 4096) {
      rt::HeapObject o{};
      ASSERT_TRUE(lookup(p + off, &o));
      ASSERT_EQ(o.start, reinterpret_cast<uintptr_t>(p));
    }
    rt::HeapObject out[8];
    const auto a = reinterpret_cast<uintptr_t>(p);
    const int n = rt::objects_overlapping(a, a + size, out, 8);
    int self = 0;
    for (int i = 0; i < n && i < 8; ++i) self += out[i].start == a;
    EXPECT_EQ(self, 1) << size;
    rt::HeapObject o{};
    ASSERT_TRUE(lookup(p, &o));
    free(opaque(p));
    EXPECT_TRUE(gone(p, o.serial));
    EXPECT_TRUE(gone(p + size - 1, o.serial));
  }
}

TEST(ObjectStore, HugeObjectsAndChunkSpans) {
  // Registered directly: address ranges far from real memory (the store never touches them).
  const uintptr_t base = uintptr_t{0x500000000000};
  const uint64_t huge = uint64_t{6} << 30;          // > 4 GiB: the huge list
  const uint64_t span = (uint64_t{5} << 20) + 123;  // several chunks
  rt::store_register(base + 64, huge, 7, kNoSite);
  rt::store_register(base + huge + 4096, span, 7, kNoSite);
  rt::HeapObject o{};
  for (uintptr_t a : {base + 64, base + 64 + huge / 2, base + 64 + huge - 1}) {
    ASSERT_TRUE(rt::with_object(a, copy_object, &o));
    EXPECT_EQ(o.start, base + 64);
    EXPECT_EQ(o.size, huge);
    EXPECT_EQ(o.alloc_thread, 7u);
  }
  EXPECT_FALSE(rt::with_object(base + 63, copy_object, &o));
  EXPECT_FALSE(rt::with_object(base + 64 + huge, copy_object, &o));
  for (uintptr_t a = base + huge + 4096; a < base + huge + 4096 + span; a += 100000) {
    ASSERT_TRUE(rt::with_object(a, copy_object, &o));
    EXPECT_EQ(o.start, base + huge + 4096);
  }
  rt::HeapObject out[4];
  EXPECT_EQ(rt::objects_overlapping(base, base + huge + (uint64_t{1} << 30), out, 4), 2);
  rt::store_release(rt::store_detach(base + 64));
  rt::store_release(rt::store_detach(base + huge + 4096));
  EXPECT_FALSE(rt::with_object(base + 64 + huge / 2, copy_object, &o));
  EXPECT_FALSE(rt::with_object(base + huge + 4096 + 3000000, copy_object, &o));
}

TEST(ObjectStore, PagesWithoutObjectsAndTheAttachEpoch) {
  // Registered directly, far from real memory. A page is clear only if no live object of any
  // level overlaps it, and every registration moves the epoch that keeps "clear" answers valid.
  const uintptr_t base = uintptr_t{0x520000000000};
  const uintptr_t page = 4096;
  EXPECT_TRUE(rt::page_without_objects(base + 5 * page + 100));
  uint64_t epoch = rt::object_attaches();
  rt::store_register(base + 5 * page + 4000, 40, 1, kNoSite);  // one page: page level
  EXPECT_NE(rt::object_attaches(), epoch);
  EXPECT_FALSE(rt::page_without_objects(base + 5 * page));
  EXPECT_FALSE(rt::page_without_objects(base + 5 * page + 4095));
  EXPECT_TRUE(rt::page_without_objects(base + 4 * page + 4095));
  EXPECT_TRUE(rt::page_without_objects(base + 6 * page));
  // Across pages (chunk level), starting at the last byte of page 9 and ending in page 12's
  // first byte: pages 9-12 are covered, 8 and 13 are not.
  epoch = rt::object_attaches();
  rt::store_register(base + 10 * page - 1, 2 * page + 2, 1, kNoSite);
  EXPECT_NE(rt::object_attaches(), epoch);
  for (uintptr_t p : {9, 10, 11, 12}) EXPECT_FALSE(rt::page_without_objects(base + p * page)) << p;
  EXPECT_TRUE(rt::page_without_objects(base + 8 * page + 4095));
  EXPECT_TRUE(rt::page_without_objects(base + 13 * page));
  // Freed: clear again (detaching does not move the attach epoch: a clear page stays clear).
  epoch = rt::object_attaches();
  rt::store_release(rt::store_detach(base + 5 * page + 4000));
  rt::store_release(rt::store_detach(base + 10 * page - 1));
  EXPECT_EQ(rt::object_attaches(), epoch);
  for (uintptr_t p : {5, 9, 10, 12}) EXPECT_TRUE(rt::page_without_objects(base + p * page)) << p;
}

TEST(ObjectStore, StaleOverlappingRecordsAreEvicted) {
  // A block freed behind the store's back leaves a stale record; a new object overlapping it
  // (same page) replaces it instead of coexisting with it.
  const uintptr_t base = uintptr_t{0x510000000000};
  rt::store_register(base + 64, 100, 3, kNoSite);
  rt::store_register(base + 400, 50, 3, kNoSite);
  rt::HeapObject o{};
  ASSERT_TRUE(rt::with_object(base + 100, copy_object, &o));
  const uint64_t detaches = rt::object_detaches();
  rt::store_register(base + 128, 300, 3, kNoSite);  // overlaps both
  // The evicted records stop being live: a caller keeping one while object_detaches() holds
  // (the exact runtime's per-thread object cache) must see the change before they are reused.
  EXPECT_NE(rt::object_detaches(), detaches);
  ASSERT_TRUE(rt::with_object(base + 100, copy_object, &o) == false);
  ASSERT_TRUE(rt::with_object(base + 200, copy_object, &o));
  EXPECT_EQ(o.start, base + 128);
  ASSERT_TRUE(rt::with_object(base + 420, copy_object, &o));
  EXPECT_EQ(o.start, base + 128);
  EXPECT_EQ(rt::store_detach(base + 64), nullptr);
  EXPECT_EQ(rt::store_detach(base + 400), nullptr);
  rt::store_release(rt::store_detach(base + 128));
  EXPECT_FALSE(rt::with_object(base + 200, copy_object, &o));
}

TEST(ObjectStore, ProducerConsumerAcrossThreads) {
  // One thread allocates, another frees: records flow between the threads' caches and stripes.
  constexpr int kObjects = 200000;
  std::vector<char*> ptrs(kObjects);
  std::vector<uint64_t> serials(kObjects);
  std::atomic<int> produced{0};
  std::atomic<long> failures{0};
  std::thread producer([&] {
    for (int i = 0; i < kObjects; ++i) {
      ptrs[i] = static_cast<char*>(opaque_malloc(16 + i % 200));
      rt::HeapObject o{};
      if (!lookup(ptrs[i], &o)) ++failures;
      serials[i] = o.serial;
      produced.store(i + 1, std::memory_order_release);
    }
  });
  std::thread consumer([&] {
    for (int i = 0; i < kObjects; ++i) {
      while (produced.load(std::memory_order_acquire) <= i) std::this_thread::yield();
      rt::HeapObject o{};
      if (!lookup(ptrs[i] + 8, &o) || o.serial != serials[i]) ++failures;
      free(opaque(ptrs[i]));
      if (!gone(ptrs[i], serials[i])) ++failures;
    }
  });
  producer.join();
  consumer.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ObjectStore, ShortLivedThreads) {
  // Thread exit hands the thread's cached records back (pthread key destructor).
  for (int round = 0; round < 200; ++round) {
    std::thread([] {
      std::vector<void*> v;
      for (int i = 0; i < 50; ++i) v.push_back(opaque_malloc(32));
      for (void* p : v) free(p);
    }).join();
  }
  void* p = opaque_malloc(32);
  expect_object(p, 32);
  free(p);
}

TEST(ObjectStore, ReallocMovesTheRecord) {
  auto* p = static_cast<char*>(opaque_malloc(64));
  rt::HeapObject o{};
  ASSERT_TRUE(lookup(p, &o));
  const uint64_t old_serial = o.serial;
  auto* q = static_cast<char*>(opaque(realloc(opaque(p), 200000)));
  ASSERT_NE(q, nullptr);
  expect_object(q, 200000);
  ASSERT_TRUE(lookup(q + 1000, &o));
  EXPECT_NE(o.serial, old_serial);
  if (q != p) {
    EXPECT_TRUE(gone(p, old_serial));
  }
  // Shrinking (in place, for glibc): the record follows the new size.
  auto* r = static_cast<char*>(opaque(realloc(opaque(q), 100)));
  ASSERT_NE(r, nullptr);
  expect_object(r, 100);
  // reallocarray: overflow is ENOMEM and leaves the block alone.
  errno = 0;
  EXPECT_EQ(reallocarray(opaque(r), opaque_size(~size_t{0} / 2), 4), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  expect_object(r, 100);
  auto* s = static_cast<char*>(opaque(reallocarray(r, 30, 10)));
  expect_object(s, 300);
  free(s);
}

TEST(ObjectStore, FailedReallocKeepsTheOldRecord) {
  auto* p = static_cast<char*>(opaque_malloc(64));
  rt::HeapObject o{};
  ASSERT_TRUE(lookup(p, &o));
  EXPECT_EQ(opaque(realloc(opaque(p), opaque_size(~size_t{0} - 4096))), nullptr);
  rt::HeapObject again{};
  ASSERT_TRUE(lookup(p + 10, &again));
  EXPECT_EQ(again.serial, o.serial);
  free(p);
}

void add_miss(rt::HeapObject& o, void* kind) {
  o.misses[reinterpret_cast<uintptr_t>(kind)] += 1;
  o.thread_mask |= 2;
  o.l1_set_mask |= 8;
}

std::vector<whymiss::profile::ObjectRecord> export_all() {
  std::vector<whymiss::profile::ObjectRecord> recs(rt::object_count_with_misses());
  recs.resize(rt::export_objects(recs.data(), recs.size()));
  return recs;
}

TEST(ObjectStore, FreedObjectsWithMissesAreRetiredAndExported) {
  auto* hot = static_cast<char*>(opaque_malloc(256));
  auto* cold = static_cast<char*>(opaque_malloc(256));
  auto* hits_only = static_cast<char*>(opaque_malloc(256));
  auto* live_hot = static_cast<char*>(opaque_malloc(4000));
  rt::HeapObject h{}, c{}, ho{}, lh{};
  ASSERT_TRUE(lookup(hot, &h));
  ASSERT_TRUE(lookup(cold, &c));
  ASSERT_TRUE(lookup(hits_only, &ho));
  ASSERT_TRUE(lookup(live_hot, &lh));
  ASSERT_TRUE(rt::with_object(reinterpret_cast<uintptr_t>(hot) + 5, add_miss,
                              reinterpret_cast<void*>(uintptr_t{3})));
  ASSERT_TRUE(
      rt::with_object(reinterpret_cast<uintptr_t>(hits_only), add_miss, nullptr));  // kind 0
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(rt::with_object(reinterpret_cast<uintptr_t>(live_hot) + 3999, add_miss,
                                reinterpret_cast<void*>(uintptr_t{1})));
  }
  free(opaque(hot));
  free(opaque(cold));
  free(opaque(hits_only));
  EXPECT_TRUE(gone(hot, h.serial));
  const auto recs = export_all();
  const whymiss::profile::ObjectRecord* rh = nullptr;
  const whymiss::profile::ObjectRecord* rl = nullptr;
  for (const auto& r : recs) {
    EXPECT_NE(r.serial, c.serial);   // no misses: recycled, not exported
    EXPECT_NE(r.serial, ho.serial);  // hits are not misses
    if (r.serial == h.serial) rh = &r;
    if (r.serial == lh.serial) rl = &r;
  }
  ASSERT_NE(rh, nullptr);
  EXPECT_EQ(rh->freed, 1u);
  EXPECT_EQ(rh->start, reinterpret_cast<uintptr_t>(hot));
  EXPECT_EQ(rh->size, 256u);
  EXPECT_EQ(rh->misses[3], 1u);
  EXPECT_EQ(rh->thread_mask, 2u);
  EXPECT_EQ(rh->l1_set_mask, 8u);
  EXPECT_EQ(rh->site, h.site);
  ASSERT_NE(rl, nullptr);
  EXPECT_EQ(rl->freed, 0u);
  EXPECT_EQ(rl->misses[1], 3u);
  free(live_hot);
}

// with_object's callback runs with the store's guard set: nested lookups (a signal handler) see
// nothing, and allocations made meanwhile go to the private heap unrecorded.
void nested(rt::HeapObject& o, void* arg) {
  auto* r = static_cast<std::pair<bool, void*>*>(arg);
  rt::HeapObject inner{};
  r->first = rt::with_object(o.start, copy_object, &inner);
  r->second = malloc(10);
}

TEST(ObjectStore, CallbackIsGuardedAgainstReentry) {
  void* p = opaque_malloc(32);
  std::pair<bool, void*> r{true, nullptr};
  ASSERT_TRUE(rt::with_object(reinterpret_cast<uintptr_t>(p), nested, &r));
  EXPECT_FALSE(r.first);
  EXPECT_TRUE(rt::is_private(r.second));
  free(r.second);
  free(p);
}

TEST(ObjectStore, NotRecordingMeansNotRegisteredButStillUnregistered) {
  void* tracked = opaque_malloc(48);
  rt::test_set_recording(false);
  void* untracked = opaque_malloc(48);
  rt::HeapObject o{};
  EXPECT_FALSE(lookup(untracked, &o));
  ASSERT_TRUE(lookup(tracked, &o));
  free(opaque(tracked));  // still unregistered, or a stale record would outlive the block
  rt::test_set_recording(true);
  EXPECT_TRUE(gone(tracked, o.serial));
  free(untracked);
}

// ---------------------------------------------------------------------------------------------
// Allocation sites

__attribute__((noinline)) void* alloc_site_a(size_t n) {
  return opaque(malloc(n));
}
__attribute__((noinline)) void* alloc_site_b(size_t n) {
  return opaque(malloc(n));
}
__attribute__((noinline)) void* via_a(size_t n) {
  return opaque(alloc_site_a(n));
}

uint32_t site_of(void* p) {
  rt::HeapObject o{};
  EXPECT_TRUE(lookup(p, &o));
  return o.site;
}

TEST(Sites, EqualStacksShareAnIndex) {
  std::vector<void*> ps;
  std::vector<uint32_t> sites;
  for (int i = 0; i < 3; ++i) {
    ps.push_back(alloc_site_a(24));
    sites.push_back(site_of(ps.back()));
  }
  EXPECT_NE(sites[0], kNoSite);
  EXPECT_EQ(sites[0], sites[1]);
  EXPECT_EQ(sites[1], sites[2]);
  void* b = alloc_site_b(24);
  EXPECT_NE(site_of(b), sites[0]);  // different direct caller
  void* c = via_a(24);
  EXPECT_NE(site_of(c), sites[0]);  // same direct caller, different caller of it
  // The recorded stack: innermost first, the walk went beyond the direct caller.
  std::vector<whymiss::profile::SiteRecord> recs(rt::site_count());
  recs.resize(rt::export_sites(recs.data(), recs.size()));
  ASSERT_GT(recs.size(), sites[0]);
  const auto& r = recs[sites[0]];
  EXPECT_GE(r.depth, 3u);
  EXPECT_LE(r.depth, static_cast<uint32_t>(whymiss::profile::kSiteFrames));
  const auto fa = reinterpret_cast<uintptr_t>(&alloc_site_a);
  EXPECT_GT(r.frames[0], fa);
  EXPECT_LT(r.frames[0], fa + 256);  // the return address inside alloc_site_a
  for (void* p : ps) free(p);
  free(b);
  free(c);
}

TEST(Sites, InternIsStableAndDistinguishes) {
  uint64_t f1[3] = {0x1000, 0x2000, 0x3000};
  uint64_t f2[3] = {0x1000, 0x2000, 0x3001};
  const uint32_t a = rt::intern_site(f1, 3);
  EXPECT_NE(a, kNoSite);
  EXPECT_EQ(rt::intern_site(f1, 3), a);
  EXPECT_NE(rt::intern_site(f2, 3), a);
  EXPECT_NE(rt::intern_site(f1, 2), a);  // a prefix is another stack
  // Concurrent interning of the same stacks gives one index per stack.
  std::vector<std::thread> threads;
  std::vector<uint32_t> got(4 * 64);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 64; ++i) {
        uint64_t f[2] = {0x77000 + static_cast<uint64_t>(i), 0x88};
        got[t * 64 + i] = rt::intern_site(f, 2);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < 64; ++i) {
    for (int t = 1; t < 4; ++t) EXPECT_EQ(got[t * 64 + i], got[i]);
    if (i > 0) {
      EXPECT_NE(got[i], got[i - 1]);
    }
  }
}

// Three frames with frame pointers; the asm after each call prevents tail calls.
__attribute__((noinline)) int capture_here(uint64_t* frames) {
  int n = rt::capture_frames(reinterpret_cast<uintptr_t>(__builtin_return_address(0)),
                             reinterpret_cast<uintptr_t>(__builtin_frame_address(0)), frames,
                             whymiss::profile::kSiteFrames);
  __asm__ volatile("" : "+r"(n));
  return n;
}
__attribute__((noinline)) int capture_one_down(uint64_t* frames) {
  int n = capture_here(frames);
  __asm__ volatile("" : "+r"(n));
  return n;
}
__attribute__((noinline)) int capture_two_down(uint64_t* frames) {
  int n = capture_one_down(frames);
  __asm__ volatile("" : "+r"(n));
  return n;
}

TEST(Sites, CaptureWalksOnlyTheThreadsStack) {
  uint64_t frames[whymiss::profile::kSiteFrames];
  // A bogus frame pointer (a global, not this thread's stack) yields the return address alone.
  static uintptr_t fake_frame[2] = {0, 0};
  EXPECT_EQ(rt::capture_frames(0x1234, reinterpret_cast<uintptr_t>(fake_frame), frames, 8), 1);
  EXPECT_EQ(frames[0], 0x1234u);
  // A real one walks: capture_here's caller, then its caller, then further.
  auto in = [](uint64_t ra, void* fn) {  // these functions are < 24 bytes long
    const auto f = reinterpret_cast<uintptr_t>(fn);
    return ra > f && ra < f + 24;
  };
  for (int thread = 0; thread < 2; ++thread) {  // main thread, then a pthread
    int n = 0;
    auto run = [&] { n = capture_two_down(frames); };
    if (thread == 0) {
      run();
    } else {
      std::thread(run).join();
    }
    ASSERT_GE(n, 3) << thread;
    EXPECT_TRUE(in(frames[0], reinterpret_cast<void*>(&capture_one_down))) << thread;
    EXPECT_TRUE(in(frames[1], reinterpret_cast<void*>(&capture_two_down))) << thread;
  }
}

TEST(Sites, StackBoundsFoundBehindManyMappings) {
  // Thousands of mappings listed before the new thread's stack in /proc/self/maps: the reader
  // must carry lines across its buffer.
  std::vector<void*> maps;
  const uintptr_t base = uintptr_t{0x100000000};
  for (int i = 0; i < 3000; ++i) {
    void* want = reinterpret_cast<void*>(base + uintptr_t(i) * 2 * 4096);  // holes: no merging
    void* m = mmap(want, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (m != MAP_FAILED) maps.push_back(m);
  }
  ASSERT_GT(maps.size(), 2000u);
  uint64_t frames[whymiss::profile::kSiteFrames];
  int n = 0;
  std::thread([&] { n = capture_two_down(frames); }).join();
  EXPECT_GE(n, 3);
  for (void* m : maps) munmap(m, 4096);
}

// ---------------------------------------------------------------------------------------------
// Interposition details

TEST(Hooks, OperatorNewDeleteVariantsRegister) {
  struct alignas(256) Wide {
    char c[300];
  };
  const auto check = [](void* p, size_t size) {
    expect_object(p, size);
    rt::HeapObject o{};
    EXPECT_TRUE(lookup(p, &o));
    return o.serial;
  };
  void* p1 = opaque(::operator new(100));
  uint64_t s = check(p1, 100);
  ::operator delete(opaque(p1));
  EXPECT_TRUE(gone(p1, s));
  void* p2 = opaque(::operator new[](200));
  s = check(p2, 200);
  ::operator delete[](opaque(p2), 200);
  EXPECT_TRUE(gone(p2, s));
  void* p3 = opaque(::operator new(300, std::nothrow));
  s = check(p3, 300);
  ::operator delete(opaque(p3), std::nothrow);
  EXPECT_TRUE(gone(p3, s));
  void* p4 = opaque(::operator new[](400, std::nothrow));
  s = check(p4, 400);
  ::operator delete[](opaque(p4), std::nothrow);
  EXPECT_TRUE(gone(p4, s));
  void* p5 = opaque(::operator new (500, std::align_val_t{512}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p5) % 512, 0u);
  s = check(p5, 500);
  ::operator delete (opaque(p5), 500, std::align_val_t{512});
  EXPECT_TRUE(gone(p5, s));
  void* p6 = opaque(::operator new[](600, std::align_val_t{4096}, std::nothrow));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p6) % 4096, 0u);
  s = check(p6, 600);
  ::operator delete[](opaque(p6), std::align_val_t{4096}, std::nothrow);
  EXPECT_TRUE(gone(p6, s));
  auto* w = opaque(new Wide[3]);  // aligned new-expression
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w) % 256, 0u);
  rt::HeapObject o{};
  EXPECT_TRUE(lookup(w, &o));
  delete[] w;
  auto* v = opaque(new std::vector<long>(1000));
  expect_object(v->data(), 8000);
  delete v;
}

int g_handler_calls = 0;
void counting_handler() {
  if (++g_handler_calls >= 3) std::set_new_handler(nullptr);
}

TEST(Hooks, OperatorNewThrowsAfterTheNewHandler) {
  const size_t impossible = opaque_size(~size_t{0} - 8192);
  EXPECT_THROW(opaque(::operator new(impossible)), std::bad_alloc);
  g_handler_calls = 0;
  std::set_new_handler(counting_handler);
  EXPECT_THROW(opaque(::operator new[](impossible, std::align_val_t{64})), std::bad_alloc);
  EXPECT_EQ(g_handler_calls, 3);
  g_handler_calls = 0;
  std::set_new_handler(counting_handler);
  EXPECT_EQ(opaque(::operator new(impossible, std::nothrow)), nullptr);
  EXPECT_EQ(g_handler_calls, 3);
  EXPECT_EQ(opaque(::operator new[](impossible, std::align_val_t{64}, std::nothrow)), nullptr);
}

TEST(Hooks, AlignedAllocation) {
  void* p = opaque(aligned_alloc(64, 1000));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  expect_object(p, 1000);
  free(p);
  p = opaque(aligned_alloc(1 << 16, 10));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (1 << 16), 0u);
  free(p);
  errno = 0;
  EXPECT_EQ(aligned_alloc(opaque_size(48), 96), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(aligned_alloc(opaque_size(0), 96), nullptr);
  EXPECT_EQ(errno, EINVAL);

  void* q = nullptr;
  errno = 4321;
  EXPECT_EQ(posix_memalign(&q, 4096, 100), 0);
  EXPECT_EQ(errno, 4321);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 4096, 0u);
  expect_object(q, 100);
  free(q);
  q = reinterpret_cast<void*>(1);
  EXPECT_EQ(posix_memalign(&q, 24, 100), EINVAL);
  EXPECT_EQ(posix_memalign(&q, 4, 100), EINVAL);  // not a multiple of sizeof(void*)
  EXPECT_EQ(q, reinterpret_cast<void*>(1));
  EXPECT_EQ(posix_memalign(&q, 64, opaque_size(~size_t{0} - 100)), ENOMEM);
  EXPECT_EQ(errno, 4321);

  void* m = opaque(memalign(256, 50));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m) % 256, 0u);
  expect_object(m, 50);
  free(m);
  void* v = opaque(valloc(10));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v) % 4096, 0u);
  expect_object(v, 10);
  free(v);
  void* pv = opaque(pvalloc(10));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pv) % 4096, 0u);
  expect_object(pv, 4096);
  free(pv);
  {
    InRuntime in;  // the same functions on the private heap
    for (size_t align : {size_t{64}, size_t{4096}, size_t{1} << 21}) {
      void* r = opaque(aligned_alloc(align, 100));
      EXPECT_TRUE(rt::is_private(r));
      EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % align, 0u);
      free(r);
      void* s = nullptr;
      EXPECT_EQ(posix_memalign(&s, align, 3000), 0);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(s) % align, 0u);
      free(s);
    }
    void* r = opaque(valloc(1));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % 4096, 0u);
    free(r);
    r = opaque(::operator new (64, std::align_val_t{128}));
    EXPECT_TRUE(rt::is_private(r));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % 128, 0u);
    ::operator delete (r, std::align_val_t{128});
  }
}

TEST(Hooks, ErrnoPreserved) {
  errno = 1234;
  void* p = opaque_malloc(100);
  EXPECT_EQ(errno, 1234);
  p = opaque(realloc(p, 100000));
  EXPECT_EQ(errno, 1234);
  void* c = opaque(calloc(3, 1000));
  EXPECT_EQ(errno, 1234);
  free(p);
  free(c);
  EXPECT_EQ(errno, 1234);
  void* big = opaque_malloc(size_t{5} << 20);
  free(big);
  EXPECT_EQ(errno, 1234);
  {
    InRuntime in;
    void* q = opaque_malloc(size_t{3} << 20);  // private big block: mmap/madvise inside
    free(q);
  }
  EXPECT_EQ(errno, 1234);
  // Failures still report ENOMEM.
  EXPECT_EQ(malloc(opaque_size(~size_t{0} - 100)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(calloc(opaque_size(~size_t{0} / 2), 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(Hooks, MallocUsableSize) {
  for (size_t n : {size_t{1}, size_t{24}, size_t{25}, size_t{1000}, size_t{200000}}) {
    void* p = opaque_malloc(n);
    EXPECT_GE(malloc_usable_size(p), n);
    EXPECT_LT(malloc_usable_size(p), n + 4096 + 64);
    free(p);
  }
  EXPECT_EQ(malloc_usable_size(nullptr), 0u);
  InRuntime in;
  void* p = opaque_malloc(100);
  EXPECT_EQ(malloc_usable_size(p), 128u);
  free(p);
}

TEST(Hooks, ForkChildKeepsAllocating) {
  std::atomic<bool> stop{false};
  std::thread busy([&] {  // holds private-heap locks on and off while we fork
    InRuntime in;
    while (!stop.load()) {
      void* p = opaque_malloc(64);
      free(p);
    }
  });
  for (int i = 0; i < 20; ++i) {
    rt::heap_before_fork();
    const pid_t pid = fork();
    if (pid == 0) {
      rt::heap_after_fork_child();
      void* a = opaque_malloc(100);
      void* b = rt::private_alloc(100);
      rt::HeapObject o{};
      const bool found = lookup(a, &o);  // the store is frozen in the child
      free(a);
      rt::private_free(b);
      {
        InRuntime in;
        void* c = opaque_malloc(64);
        free(c);
      }
      _exit(a != nullptr && b != nullptr && !found ? 0 : 1);
    }
    rt::heap_after_fork_parent();
    ASSERT_GT(pid, 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  stop = true;
  busy.join();
}

// ---------------------------------------------------------------------------------------------
// Stress: 4 threads x 200k malloc/free of random sizes, with lookups of their own live objects
// (always found, with the right bounds) and of freed ones (never found with the old serial).

TEST(Stress, FourThreadsMallocFreeLookup) {
  const uint64_t dropped_before = rt::dropped_objects();
  std::atomic<long> failures{0};
  auto worker = [&](unsigned seed) {
    std::mt19937_64 rng(seed);
    struct Live {
      char* p;
      size_t size;
      uint64_t serial;
      bool is_new;
    };
    std::vector<Live> live;
    live.reserve(600);
    for (int op = 0; op < 200000; ++op) {
      if (live.size() < 512 && (live.empty() || rng() % 100 < 52)) {
        const unsigned r = rng() % 1000;
        const size_t size = r < 900   ? 1 + rng() % 256
                            : r < 995 ? 1 + rng() % 20000
                                      : 1 + rng() % (3 << 20);
        const bool is_new = op % 7 == 0;
        char* p = static_cast<char*>(is_new ? opaque(::operator new(size)) : malloc(size));
        rt::HeapObject o{};
        const char* probe = p + rng() % size;
        if (!lookup(probe, &o) || o.start != reinterpret_cast<uintptr_t>(p) || o.size != size) {
          ++failures;
          continue;
        }
        live.push_back({p, size, o.serial, is_new});
      } else {
        const size_t k = rng() % live.size();
        const Live l = live[k];
        live[k] = live.back();
        live.pop_back();
        if (l.is_new) {
          ::operator delete(opaque(l.p), l.size);
        } else {
          free(opaque(l.p));
        }
        if (!gone(l.p, l.serial) || !gone(l.p + l.size - 1, l.serial)) ++failures;
      }
      if (op % 20000 == 0) {  // everything still live is still found
        for (const Live& l : live) {
          rt::HeapObject o{};
          if (!lookup(l.p + l.size / 2, &o) || o.serial != l.serial) ++failures;
        }
      }
    }
    for (const Live& l : live) l.is_new ? ::operator delete(l.p) : free(l.p);
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) threads.emplace_back(worker, 100 + t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(rt::dropped_objects(), dropped_before);
}

}  // namespace
