// The output queue: units come out in the order they were sealed, with their packets and events intact; a full
// queue refuses a seal without changing anything; one producer and one consumer on two threads lose nothing.
#include "preload/output_queue.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace cumemtrace::preload {
namespace {

EventRecord Event(uint64_t seq) {
  EventRecord ev{};
  ev.seq = seq;
  return ev;
}

class OutputQueueTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(queue_.Init(4096)); }

  // The oldest sealed unit holds `packet_bytes` of packets, then events numbered `seqs`, with mark `complete_below`;
  // it is then written (popped).
  void ExpectOldestThenPop(size_t packet_bytes, const std::vector<uint64_t>& seqs, uint64_t complete_below) {
    OutputQueue::Unit* unit = queue_.Oldest();
    ASSERT_NE(unit, nullptr);
    EXPECT_EQ(unit->packets.size(), packet_bytes);
    ASSERT_EQ(unit->event_count, seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(unit->events[i].seq, seqs[i]);
    EXPECT_EQ(unit->complete_below, complete_below);
    queue_.Pop();
  }

  OutputQueue queue_;
};

TEST_F(OutputQueueTest, SealedUnitsComeOutOldestFirstWithTheirContents) {
  EXPECT_FALSE(queue_.HasSealed());
  EXPECT_EQ(queue_.Oldest(), nullptr);
  EXPECT_EQ(queue_.last_event(), nullptr);

  queue_.packets()->Append("ab", 2);
  queue_.Append(Event(1));
  queue_.Append(Event(2));
  ASSERT_NE(queue_.last_event(), nullptr);
  EXPECT_EQ(queue_.last_event()->seq, 2u);
  ASSERT_TRUE(queue_.Seal(3));
  // The open unit is a fresh one.
  EXPECT_EQ(queue_.event_count(), 0u);
  EXPECT_EQ(queue_.packets()->size(), 0u);
  EXPECT_EQ(queue_.last_event(), nullptr);

  queue_.Append(Event(3));
  ASSERT_TRUE(queue_.Seal(4));
  EXPECT_TRUE(queue_.HasSealed());

  ExpectOldestThenPop(2, {1, 2}, 3);
  ExpectOldestThenPop(0, {3}, 4);
  EXPECT_FALSE(queue_.HasSealed());
  EXPECT_EQ(queue_.Oldest(), nullptr);
}

// Each unit keeps its own stacks (count, then frames) for the writer; a written unit's slot starts empty again.
TEST_F(OutputQueueTest, KeptStacksTravelWithTheirUnit) {
  const uint64_t a[] = {0x30, 0x20, 0x10};
  const uint64_t b[] = {0x31};
  EXPECT_EQ(queue_.KeepStack(a, 0), 0u);  // no frames: no stack
  const uint64_t ref_a = queue_.KeepStack(a, 3);
  const uint64_t ref_b = queue_.KeepStack(b, 1);
  EXPECT_EQ(ref_a, 1u);  // 1 + offset
  EXPECT_EQ(ref_b, 5u);
  queue_.Append(Event(1));
  ASSERT_TRUE(queue_.Seal(2));
  const uint64_t ref_c = queue_.KeepStack(b, 1);
  EXPECT_EQ(ref_c, 1u);  // the next unit's stacks start at its own offset 0

  OutputQueue::Unit* unit = queue_.Oldest();
  ASSERT_NE(unit, nullptr);
  ASSERT_EQ(unit->stacks.size(), 6u);
  EXPECT_EQ(unit->stacks[ref_a - 1], 3u);
  EXPECT_EQ(unit->stacks[ref_a], 0x30u);
  EXPECT_EQ(unit->stacks[ref_a + 2], 0x10u);
  EXPECT_EQ(unit->stacks[ref_b - 1], 1u);
  EXPECT_EQ(unit->stacks[ref_b], 0x31u);
  queue_.Pop();
  for (int i = 0; i < 2; ++i) {  // round the ring back to the first slot: empty
    queue_.Append(Event(2 + i));
    ASSERT_TRUE(queue_.Seal(3 + i));
    queue_.Pop();
  }
  EXPECT_EQ(queue_.KeepStack(a, 3), 1u);
}

TEST_F(OutputQueueTest, AnEmptyOpenUnitIsNotSealed) {
  ASSERT_TRUE(queue_.Seal(1));
  EXPECT_FALSE(queue_.HasSealed());
  queue_.packets()->Append("x", 1);  // packets alone (a notice, a thread) make a unit
  ASSERT_TRUE(queue_.Seal(1));
  EXPECT_TRUE(queue_.HasSealed());
}

TEST_F(OutputQueueTest, AFullQueueRefusesASealAndKeepsTheOpenUnit) {
  for (uint64_t i = 1; i <= OutputQueue::kMaxSealed; ++i) {
    queue_.Append(Event(i));
    ASSERT_TRUE(queue_.Seal(i + 1));
  }
  queue_.Append(Event(100));
  EXPECT_FALSE(queue_.Seal(101));
  EXPECT_EQ(queue_.event_count(), 1u);  // still open, still holding its event
  EXPECT_EQ(queue_.last_event()->seq, 100u);
  EXPECT_EQ(queue_.Oldest()->events[0].seq, 1u);

  queue_.Pop();  // written: one slot is free
  ASSERT_TRUE(queue_.Seal(101));
  EXPECT_EQ(queue_.Oldest()->events[0].seq, 2u);
  queue_.Pop();
  EXPECT_EQ(queue_.Oldest()->events[0].seq, 100u);
  EXPECT_EQ(queue_.Oldest()->complete_below, 101u);
}

TEST_F(OutputQueueTest, BatchFullAtItsCapacity) {
  for (size_t i = 0; i + 1 < OutputQueue::kBatchEvents; ++i) queue_.Append(Event(i + 1));
  EXPECT_FALSE(queue_.batch_full());
  queue_.Append(Event(OutputQueue::kBatchEvents));
  EXPECT_TRUE(queue_.batch_full());
}

TEST_F(OutputQueueTest, ClearForgetsEverythingBuffered) {
  queue_.Append(Event(1));
  ASSERT_TRUE(queue_.Seal(2));
  queue_.Append(Event(2));
  queue_.packets()->Append("y", 1);
  queue_.Clear();
  EXPECT_FALSE(queue_.HasSealed());
  EXPECT_EQ(queue_.event_count(), 0u);
  EXPECT_EQ(queue_.packets()->size(), 0u);
}

// The recorder's shape: one thread fills and seals (writing the sealed units itself when the queue is full, as
// SealLocked does), another writes; every event arrives once, in order, with each unit's mark.
TEST_F(OutputQueueTest, OneProducerOneConsumerLoseNothing) {
  constexpr uint64_t kEvents = 200000;
  std::vector<uint64_t> written;
  written.reserve(kEvents);
  std::vector<uint64_t> marks;
  std::atomic<bool> done{false};
  std::mutex writer;  // the writer's lock: the consumer thread, or the producer when the queue is full
  auto write_sealed = [&] {
    while (OutputQueue::Unit* unit = queue_.Oldest()) {
      for (size_t i = 0; i < unit->event_count; ++i) written.push_back(unit->events[i].seq);
      marks.push_back(unit->complete_below);
      queue_.Pop();
    }
  };
  std::thread consumer([&] {
    while (!done.load()) {
      std::lock_guard<std::mutex> hold(writer);
      write_sealed();
    }
  });
  uint64_t stalls = 0;
  for (uint64_t seq = 1; seq <= kEvents; ++seq) {
    queue_.Append(Event(seq));
    if (queue_.event_count() == 97 || seq == kEvents) {  // small units: the queue fills often
      if (!queue_.Seal(seq + 1)) {
        ++stalls;
        std::lock_guard<std::mutex> hold(writer);
        write_sealed();
        ASSERT_TRUE(queue_.Seal(seq + 1));
      }
    }
  }
  done.store(true);
  consumer.join();
  write_sealed();
  ASSERT_EQ(written.size(), kEvents);
  for (uint64_t i = 0; i < kEvents; ++i) ASSERT_EQ(written[i], i + 1);
  for (size_t i = 1; i < marks.size(); ++i) ASSERT_GT(marks[i], marks[i - 1]);
  EXPECT_EQ(marks.back(), kEvents + 1);
  RecordProperty("stalls", static_cast<int>(stalls));
}

}  // namespace
}  // namespace cumemtrace::preload
