// AccessRing (src/runtime/exact/access_ring.h): the single-producer single-consumer ring between
// a program thread and exact mode's relay thread.
#include "runtime/exact/access_ring.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

namespace whymiss::rt {
namespace {

AccessRecord rec(uint64_t i) { return AccessRecord{i * 3 + 1, i * 64, uint32_t(1 + i % 8), uint32_t(i % 2)}; }

TEST(AccessRing, FillsUpThenRefusesUntilTheConsumerPublishesRoom) {
  auto ring = std::make_unique<AccessRing>();
  for (uint64_t i = 0; i < AccessRing::kSlots; ++i) ASSERT_TRUE(ring->push(rec(i))) << i;
  EXPECT_FALSE(ring->push(rec(999)));
  EXPECT_EQ(ring->produced(), AccessRing::kSlots);
  AccessRecord r;
  ASSERT_TRUE(ring->pop(&r));
  ring->done();
  EXPECT_EQ(r.ip, rec(0).ip);
  // One record done frees a slot for the consumer but not yet for the producer: room is
  // published in batches, or by publish().
  EXPECT_FALSE(ring->push(rec(999)));
  ring->publish();
  EXPECT_EQ(ring->consumed(), 1u);
  EXPECT_TRUE(ring->push(rec(AccessRing::kSlots)));
  EXPECT_FALSE(ring->push(rec(999)));
  for (uint64_t i = 1; i <= AccessRing::kSlots; ++i) {
    ASSERT_TRUE(ring->pop(&r)) << i;
    ring->done();
    EXPECT_EQ(r.ip, rec(i).ip);
    EXPECT_EQ(r.addr, rec(i).addr);
    EXPECT_EQ(r.size, rec(i).size);
    EXPECT_EQ(r.write, rec(i).write);
  }
  EXPECT_FALSE(ring->pop(&r));
  EXPECT_FALSE(ring->pending());
}

// consumed() (what the producer's fence waits for) counts a record only once the consumer is done
// with it, never at pop().
TEST(AccessRing, ConsumedCountsOnlyRecordsTheConsumerIsDoneWith) {
  auto ring = std::make_unique<AccessRing>();
  for (uint64_t i = 0; i < AccessRing::kPublishEvery; ++i) ASSERT_TRUE(ring->push(rec(i)));
  AccessRecord r;
  for (uint64_t i = 0; i + 1 < AccessRing::kPublishEvery; ++i) {
    ASSERT_TRUE(ring->pop(&r));
    ring->done();
  }
  ASSERT_TRUE(ring->pop(&r));  // the last one: popped, still being worked on
  EXPECT_EQ(ring->consumed(), 0u);
  ring->done();  // a batch complete: published
  EXPECT_EQ(ring->consumed(), uint64_t(AccessRing::kPublishEvery));
  EXPECT_FALSE(ring->pending());
}

// A producer and a consumer on two threads: every record arrives once, in order, across many
// wrap-arounds, and the consumer's published count ends at the total.
TEST(AccessRing, DeliversEveryRecordInOrderAcrossThreads) {
  auto ring = std::make_unique<AccessRing>();
  constexpr uint64_t kTotal = 2'000'000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kTotal; ++i)
      while (!ring->push(rec(i))) std::this_thread::yield();
  });
  uint64_t next = 0, bad = 0;
  while (next < kTotal) {
    AccessRecord r;
    if (!ring->pop(&r)) {
      ring->publish();
      std::this_thread::yield();
      continue;
    }
    ring->done();
    const AccessRecord want = rec(next++);
    bad += r.ip != want.ip || r.addr != want.addr || r.size != want.size || r.write != want.write;
  }
  producer.join();
  ring->publish();
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(ring->consumed(), kTotal);
  EXPECT_EQ(ring->produced(), kTotal);
  EXPECT_FALSE(ring->pending());
}

}  // namespace
}  // namespace whymiss::rt
