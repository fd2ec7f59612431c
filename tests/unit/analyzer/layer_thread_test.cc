// LayerThread: whoever applies the queued batches (a thread of the layer's own, other threads through HelpOnce while
// the scan's thread goes on queueing, or the scan's thread itself when the queue is full), the allocator layer ends
// in the state it reaches with every event applied inline: the same figures, peaks, blocks and stamps.
#include "analyzer/model/torch/layer_thread.h"

#include <atomic>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "proto/format.h"

namespace cumemtrace::analyzer {
namespace {

using Mode = LayerThread::Mode;

// A PyTorch-like sequence on device 0: segments of 20 MiB, blocks carved from them front to back, frees of random
// live blocks (requested, then completed), and backward passes (the stamps' epochs) counted every 1000 events.
// Enough events for many batches of LayerThread::kBatchSteps, so that the queue fills.
struct Sequence {
  struct Item {
    Event event;
    AutogradStamp stamp;
  };
  std::vector<Item> items;

  explicit Sequence(size_t events) {
    std::mt19937_64 rng(20261127);
    constexpr uint64_t kSegment = 20ull << 20;
    uint64_t segment = 0, used = kSegment;  // no segment yet
    std::vector<uint64_t> live;
    uint32_t epoch = 0;
    while (items.size() < events) {
      if (items.size() % 1000 == 0) ++epoch;
      if (!live.empty() && rng() % 2 == 0) {
        const size_t k = rng() % live.size();
        Add(format::Api::kTorchFreeRequested, live[k], 0, epoch);
        Add(format::Api::kTorchFreeCompleted, live[k], 0, epoch);
        live[k] = live.back();
        live.pop_back();
        continue;
      }
      const uint64_t size = 512 * (1 + rng() % 64);
      if (used + size > kSegment) {
        segment += 1ull << 32;
        used = 0;
        Add(format::Api::kTorchSegmentAlloc, segment, kSegment, epoch);
      }
      Add(format::Api::kTorchAlloc, segment + used, size, epoch);
      live.push_back(segment + used);
      used += size;
    }
  }

  void Add(format::Api api, uint64_t address, uint64_t size, uint32_t epoch) {
    Item item;
    Event& e = item.event;
    e.seq = items.size() + 1;
    e.time_ns = static_cast<int64_t>(e.seq) * 1000;
    e.api = api;
    e.info = format::FindApi(static_cast<uint32_t>(api));
    e.address = address;
    e.size = size;
    e.stack = 1 + address % 7;
    item.stamp.epoch = epoch;
    item.stamp.backward = epoch % 2 == 0;
    item.stamp.grad = format::GradMode::kRecording;
    items.push_back(item);
  }
};

// What the reports read of the layer, as text: figures, peaks with where they were reached, counts of estimates,
// every block of the map, and the passes at the allocated peak.
std::string Fingerprint(LayerThread& thread) {
  AllocatorLayer& layer = thread.layer();
  std::ostringstream out;
  const TorchFigures f = layer.Figures(0);
  out << f.allocated_bytes << ' ' << f.allocations << ' ' << f.requested_bytes << ' ' << f.active_bytes << ' '
      << f.reserved_bytes << ' ' << f.segments << ' ' << f.cached_free_bytes << ' ' << f.largest_free_block << '\n';
  const TorchDeviceStats* s = layer.Find(0);
  if (s != nullptr) {
    out << s->allocated_bytes.peak << '@' << s->allocated_bytes.peak_at.index << ' ' << s->reserved_bytes.peak << '@'
        << s->reserved_bytes.peak_at.index << ' ' << s->alloc_events << ' ' << s->mismatches << ' '
        << s->estimated_blocks << ' ' << s->freed_since_allocated_peak.size() << '\n';
  }
  for (const TorchSegmentView& segment : layer.Map(0)) {
    out << "segment " << segment.address << ' ' << segment.size << '\n';
    for (const TorchBlockView& b : segment.blocks) out << "  " << b.address << ' ' << b.block.size << '\n';
  }
  out << "passes at the allocated peak " << thread.PassesAtAllocatedPeak(0) << '\n';
  return out.str();
}

// Applies `sequence.items[from, to)`.
void ApplyRange(LayerThread& thread, const Sequence& sequence, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) thread.Apply(sequence.items[i].event, i, sequence.items[i].stamp);
}

struct Replayed {
  std::string state;
  uint64_t helped = 0;  // batches the helpers applied
};

Replayed Replay(const Sequence& sequence, Mode mode, int helpers) {
  LayerThread thread(mode);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> helped{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < helpers; ++i) {
    threads.emplace_back([&] {
      while (!done.load()) {
        if (thread.HelpOnce()) helped.fetch_add(1);
      }
    });
  }
  ApplyRange(thread, sequence, 0, sequence.items.size());
  Replayed r{Fingerprint(thread), 0};
  done.store(true);
  for (std::thread& t : threads) t.join();
  r.helped = helped.load();
  return r;
}

TEST(LayerThread, EveryWayOfApplyingEndsInTheInlineState) {
  const Sequence sequence(20 * LayerThread::kBatchSteps);
  const std::string inline_state = Replay(sequence, Mode::kInline, 0).state;
  ASSERT_NE(inline_state.find("segment"), std::string::npos);
  EXPECT_EQ(Replay(sequence, Mode::kOwnThread, 0).state, inline_state);
  const Replayed own_helped = Replay(sequence, Mode::kOwnThread, 1);
  EXPECT_EQ(own_helped.state, inline_state);
  EXPECT_EQ(own_helped.helped, 0u) << "only a shared layer takes help";
  EXPECT_EQ(Replay(sequence, Mode::kShared, 0).state, inline_state);  // the scan's thread makes room itself
  // Spinning helpers take some batches or none, as the scheduler has it (HelpOnceAppliesTheOldestBatch makes it
  // certain): whichever it was, the end state is the same.
  for (int round = 0; round < 5; ++round) {
    EXPECT_EQ(Replay(sequence, Mode::kShared, 1).state, inline_state);
    EXPECT_EQ(Replay(sequence, Mode::kShared, 2).state, inline_state);  // helpers never apply two batches at once
  }
}

// Help comes from another thread, takes the oldest batch (once two are queued and nobody applies one), and leaves
// the rest in order for whoever comes next.
TEST(LayerThread, HelpOnceAppliesTheOldestBatch) {
  const Sequence sequence(12 * LayerThread::kBatchSteps);
  const std::string inline_state = Replay(sequence, Mode::kInline, 0).state;
  LayerThread thread(Mode::kShared);
  ApplyRange(thread, sequence, 0, 2 * LayerThread::kBatchSteps);  // two batches queued, none applied
  int helped = 0;
  std::thread([&] {
    for (int i = 0; i < 3; ++i) helped += thread.HelpOnce() ? 1 : 0;
  }).join();
  EXPECT_EQ(helped, 2);  // both batches, then none left
  ApplyRange(thread, sequence, 2 * LayerThread::kBatchSteps, sequence.items.size());
  EXPECT_EQ(Fingerprint(thread), inline_state);
  EXPECT_FALSE(LayerThread(Mode::kOwnThread).HelpOnce());
  EXPECT_FALSE(LayerThread(Mode::kInline).HelpOnce());
}

// The switch to inline (phases) waits for every queued batch, whoever applies it, and no helper touches the layer
// afterwards.
TEST(LayerThread, RunningInlineAfterSharingKeepsTheOrder) {
  const Sequence sequence(12 * LayerThread::kBatchSteps);
  const std::string inline_state = Replay(sequence, Mode::kInline, 0).state;
  for (int round = 0; round < 5; ++round) {
    LayerThread thread(Mode::kShared);
    ApplyRange(thread, sequence, 0, 2 * LayerThread::kBatchSteps);
    bool helped = false;
    std::thread([&] { helped = thread.HelpOnce(); }).join();  // one batch applied by another thread, one queued
    EXPECT_TRUE(helped);
    std::atomic<bool> done{false};
    std::thread helper([&] {
      while (!done.load()) thread.HelpOnce();
    });
    const size_t half = sequence.items.size() / 2;
    ApplyRange(thread, sequence, 2 * LayerThread::kBatchSteps, half);
    thread.RunInline();
    ApplyRange(thread, sequence, half, sequence.items.size());
    const std::string state = Fingerprint(thread);
    done.store(true);
    helper.join();
    EXPECT_EQ(state, inline_state);
  }
}

}  // namespace
}  // namespace cumemtrace::analyzer
