// ReorderWindow must give exactly the output of a plain min-heap of `capacity` events (by seq, then arrival) for
// traces without marks, release exactly the events below each low-water mark for traces with them (however late an
// event is, as long as the writer's marks are right), and count every event handed over out of order.
#include "analyzer/reader/reorder_window.h"

#include <algorithm>
#include <queue>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

class Collect : public TraceVisitor {
 public:
  void OnEvent(const Event& e) override { out.push_back({e.seq, e.address}); }
  std::vector<std::pair<uint64_t, uint64_t>> out;  // (seq, arrival stored in address)
};

std::vector<std::pair<uint64_t, uint64_t>> Reference(const std::vector<uint64_t>& seqs, size_t capacity) {
  using Item = std::pair<uint64_t, uint64_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  std::vector<Item> out;
  for (uint64_t i = 0; i < seqs.size(); ++i) {
    heap.push({seqs[i], i});
    if (heap.size() > capacity) {
      out.push_back(heap.top());
      heap.pop();
    }
  }
  while (!heap.empty()) {
    out.push_back(heap.top());
    heap.pop();
  }
  return out;
}

std::vector<std::pair<uint64_t, uint64_t>> RunWindow(const std::vector<uint64_t>& seqs, size_t capacity) {
  ReorderWindow window(capacity);
  Collect c;
  for (uint64_t i = 0; i < seqs.size(); ++i) {
    Event e;
    e.seq = seqs[i];
    e.address = i;
    window.Push(e, c);
    EXPECT_LE(window.size(), capacity);
  }
  window.Drain(c);
  EXPECT_EQ(window.emitted(), seqs.size());
  return c.out;
}

TEST(ReorderWindow, SortedInputPassesThrough) {
  std::vector<uint64_t> seqs;
  for (uint64_t i = 0; i < 1000; ++i) seqs.push_back(i);
  EXPECT_EQ(RunWindow(seqs, 16), Reference(seqs, 16));
}

TEST(ReorderWindow, MatchesAMinHeapOnRandomInput) {
  std::mt19937_64 rng(42);
  for (size_t capacity : {1, 2, 3, 8, 64}) {
    for (int round = 0; round < 50; ++round) {
      std::vector<uint64_t> seqs;
      const int n = 1 + static_cast<int>(rng() % 500);
      for (int i = 0; i < n; ++i) {
        // Mostly increasing with jitter, some duplicates, some far-late events.
        const uint64_t base = static_cast<uint64_t>(i) * 2;
        const uint64_t r = rng() % 10;
        seqs.push_back(r == 0 ? rng() % 100 : base + rng() % (2 * capacity + 1));
      }
      ASSERT_EQ(RunWindow(seqs, capacity), Reference(seqs, capacity)) << capacity << " " << round;
    }
  }
}

TEST(ReorderWindow, ReversedInput) {
  std::vector<uint64_t> seqs;
  for (uint64_t i = 300; i > 0; --i) seqs.push_back(i);
  EXPECT_EQ(RunWindow(seqs, 100), Reference(seqs, 100));
}

// Batches of a writer whose threads append late (a free appended far after its number was taken): the marks say
// what can no longer be preceded, and the output is exactly sorted with nothing late, whatever the lateness.
TEST(ReorderWindow, MarksOrderExactlyBeyondAnyWindow) {
  std::mt19937_64 rng(7);
  constexpr uint64_t kEvents = 200000;
  // Each event is appended at a random delay after its number, some of them 150 000 events late.
  std::vector<std::pair<uint64_t, uint64_t>> appends;  // (append time, seq)
  for (uint64_t seq = 1; seq <= kEvents; ++seq) {
    const uint64_t r = rng() % 1000;
    const uint64_t delay = r == 0 ? 150000 : r < 50 ? rng() % 5000 : 0;
    appends.push_back({seq + delay, seq});
  }
  std::sort(appends.begin(), appends.end());
  ReorderWindow window(16);  // a tiny window: only the marks can get this right
  Collect c;
  size_t next = 0;
  constexpr size_t kBatch = 512;
  while (next < appends.size()) {
    const size_t end = std::min(appends.size(), next + kBatch);
    window.ExpectMarks();
    for (size_t i = next; i < end; ++i) {
      Event e;
      e.seq = appends[i].second;
      window.Push(e, c);
    }
    // The mark: the smallest number not yet appended (what the preload's pending slots compute).
    uint64_t mark = UINT64_MAX;
    for (size_t i = end; i < appends.size(); ++i) mark = std::min(mark, appends[i].second);
    if (end == appends.size()) mark = kEvents + 1;
    window.ReleaseBelow(mark, c);
    next = end;
  }
  window.Drain(c);
  ASSERT_EQ(c.out.size(), kEvents);
  for (uint64_t i = 0; i < kEvents; ++i) ASSERT_EQ(c.out[i].first, i + 1);
  EXPECT_EQ(window.late_events(), 0u);
  EXPECT_TRUE(window.marked());
}

// Without marks, an event later than the window is handed over out of order, and counted.
TEST(ReorderWindow, EventsLaterThanTheWindowAreCounted) {
  std::vector<uint64_t> seqs;
  for (uint64_t i = 2; i < 100; ++i) seqs.push_back(i);
  seqs.push_back(1);  // 98 events late, window 16
  ReorderWindow window(16);
  Collect c;
  for (uint64_t s : seqs) {
    Event e;
    e.seq = s;
    window.Push(e, c);
  }
  window.Drain(c);
  EXPECT_EQ(window.late_events(), 1u);
  EXPECT_EQ(window.max_lateness(), 82u);  // 83 had left when 1 arrived
  EXPECT_FALSE(window.marked());
}

// A batch that skips the ring (BeginPassThrough, PassOn) must leave the visitor, and the window's counts, exactly as
// pushing it would have: on batches in order and not, marks right and wrong, events late and not.
TEST(ReorderWindow, PassingThroughEqualsPushing) {
  struct Batch {
    std::vector<uint64_t> seqs;
    uint64_t mark;
  };
  for (uint64_t round = 0; round < 40; ++round) {
    std::mt19937_64 rng(round);
    std::vector<Batch> batches;
    uint64_t next_seq = 1;
    std::vector<uint64_t> held;  // numbers taken but not yet written: a later batch carries them
    for (int b = 0; b < 60; ++b) {
      Batch batch;
      const size_t rows = 1 + rng() % 300;
      for (size_t i = 0; i < rows; ++i) {
        if (!held.empty() && rng() % 8 == 0) {
          batch.seqs.push_back(held.back());
          held.pop_back();
        } else if (rng() % 16 == 0) {
          held.push_back(next_seq++);  // written in a later batch
          --i;
        } else {
          batch.seqs.push_back(next_seq++);
        }
      }
      // Mostly batches in order; some with a row out of place.
      if (rng() % 3 == 0) std::sort(batch.seqs.begin(), batch.seqs.end());
      const uint64_t lowest_held = held.empty() ? next_seq : *std::min_element(held.begin(), held.end());
      // The right mark, none, or (damage) one too high, which makes later events late.
      const uint64_t r = rng() % 10;
      batch.mark = r == 0 ? 0 : r == 1 ? next_seq + 5 : lowest_held;
      batches.push_back(std::move(batch));
    }
    ReorderWindow pushed(64), passed(64);
    Collect pushed_out, passed_out;
    uint64_t arrival = 0;
    size_t passes = 0;
    for (const Batch& batch : batches) {
      std::vector<Event> events(batch.seqs.size());
      for (size_t i = 0; i < events.size(); ++i) {
        events[i].seq = batch.seqs[i];
        events[i].address = arrival++;
      }
      if (batch.mark != 0) {
        pushed.ExpectMarks();
        passed.ExpectMarks();
      }
      for (const Event& e : events) pushed.Push(e, pushed_out);
      const bool in_order = std::is_sorted(batch.seqs.begin(), batch.seqs.end());
      if (in_order && passed.BeginPassThrough(batch.seqs.front(), batch.seqs.back(), batch.mark, passed_out)) {
        ++passes;
        // In pieces, as the reader hands them over.
        for (size_t begin = 0; begin < events.size(); begin += 7) {
          const size_t n = std::min<size_t>(7, events.size() - begin);
          passed.PassOn(absl::Span<const Event>(events.data() + begin, n), passed_out);
        }
      } else {
        for (const Event& e : events) passed.Push(e, passed_out);
      }
      if (batch.mark != 0) {
        pushed.ReleaseBelow(batch.mark, pushed_out);
        passed.ReleaseBelow(batch.mark, passed_out);
      }
    }
    pushed.Drain(pushed_out);
    passed.Drain(passed_out);
    ASSERT_EQ(passed_out.out, pushed_out.out) << "round " << round;
    EXPECT_EQ(passed.emitted(), pushed.emitted());
    EXPECT_EQ(passed.late_events(), pushed.late_events());
    EXPECT_EQ(passed.max_lateness(), pushed.max_lateness());
    EXPECT_GT(passes, 0u) << "round " << round;
    EXPECT_LT(passes, batches.size()) << "round " << round;
  }
}

// Only a marked batch, wholly below its mark, arriving after everything smaller, may skip the ring.
TEST(ReorderWindow, PassingThroughOnlyWhenNothingCanComeBetween) {
  Collect c;
  ReorderWindow unmarked(16);
  EXPECT_FALSE(unmarked.BeginPassThrough(1, 5, 6, c));  // no marks yet: the bounded window decides
  ReorderWindow w(16);
  w.ExpectMarks();
  EXPECT_FALSE(w.BeginPassThrough(1, 5, 0, c));  // the batch has no mark
  EXPECT_FALSE(w.BeginPassThrough(1, 6, 6, c));  // its last row is not below its mark
  EXPECT_FALSE(w.BeginPassThrough(5, 1, 6, c));  // not in order
  Event held;
  held.seq = 10;
  w.Push(held, c);
  EXPECT_FALSE(w.BeginPassThrough(11, 12, 13, c));  // the window holds an event
  w.ReleaseBelow(11, c);
  EXPECT_FALSE(w.BeginPassThrough(3, 4, 13, c));  // 10 has left: these would be late
  ASSERT_TRUE(w.BeginPassThrough(11, 12, 13, c));
  ASSERT_EQ(c.out.size(), 1u);  // what had left was handed over first
  EXPECT_EQ(c.out[0].first, 10u);
}

}  // namespace
}  // namespace cumemtrace::analyzer
