// ReorderWindow must give exactly the output of a plain min-heap of `capacity` events (by seq, then arrival).
#include "analyzer/reader/reorder_window.h"

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

}  // namespace
}  // namespace cumemtrace::analyzer
