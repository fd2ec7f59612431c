// Follows live pinned host memory (pinned_host of every device, summed) through a replay whose start and end are
// known, and finds where it rose: the trace is cut into fixed windows of max(1 ms, duration / 200); a window's rise
// is the most it climbed above its starting value (max live bytes in the window - live bytes at its start), so a
// spike that comes and goes inside one window still counts. For each window it also sums the pinned bytes each
// (thread, stack) allocated, to name who caused the rise. It keeps a 50-point timeline (max per bucket) for charts.
// Memory: at most ~201 windows, each with its (thread, stack) sums; never per event.
//
// The duration is known only at the end of a read, so the first pass records the changes (PinnedChange, one per
// pinned allocation or free, bounded by AnalyzeOptions::max_pinned_log) and replays them here at the end.
#ifndef CUMEMTRACE_ANALYZER_MODEL_USAGE_PINNED_TRACKER_H_
#define CUMEMTRACE_ANALYZER_MODEL_USAGE_PINNED_TRACKER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analyzer/model/memory/memory_model.h"
#include "analyzer/model/stacks/stack_grouper.h"

namespace cumemtrace::analyzer {

struct PinnedWindow {
  int64_t start_ns = 0;  // relative to the start of the trace
  int64_t end_ns = 0;
  uint64_t start_bytes = 0;
  uint64_t max_bytes = 0;
  uint64_t rise_bytes = 0;  // max_bytes - start_bytes
  // Who allocated the most pinned bytes in this window (top_allocated_bytes == 0: nobody allocated): a thread and
  // a group of stacks (one stack unless a grouper merged them); top_stack is the group's largest stack.
  uint32_t top_thread = 0;
  uint64_t top_stack = 0;
  GroupKey top_key;
  uint64_t top_stacks = 0;
  uint64_t top_allocated_bytes = 0;
  uint64_t allocated_bytes = 0;  // all pinned allocations in the window
  uint64_t allocations = 0;
};

struct TimelinePoint {
  int64_t time_ns = 0;  // start of the bucket, relative
  uint64_t bytes = 0;   // the most live pinned bytes in the bucket
};

struct PinnedResult {
  bool computed = false;
  uint64_t peak_bytes = 0;
  int64_t peak_time_ns = 0;  // relative
  uint64_t peak_seq = 0;
  uint64_t final_bytes = 0;
  uint64_t allocations = 0;
  uint64_t allocated_bytes = 0;
  int64_t window_ns = 0;
  std::vector<PinnedWindow> windows;   // every window, in time order
  std::vector<TimelinePoint> timeline;  // kTimelinePoints points
};

// One change of live pinned memory.
struct PinnedChange {
  int64_t time_ns = 0;  // trace clock
  uint64_t seq = 0;
  uint64_t stack = 0;
  uint64_t bytes = 0;
  uint32_t thread = 0;
  bool up = false;  // an allocation (else a free)
};

// The pinned changes `event` made, given what it did (`outcome`): none, one, or two (a replacement drops the old
// allocation, then adds the new one). Returns how many it wrote to `out`.
int PinnedChanges(const Event& event, const Outcome& outcome, PinnedChange out[2]);

class PinnedTracker {
 public:
  static constexpr int64_t kMinWindowNs = 1'000'000;
  static constexpr int64_t kWindowsPerTrace = 200;
  static constexpr int kTimelinePoints = 50;

  // `start_ns` and `duration_ns` on the trace clock (duration >= 0).
  PinnedTracker(int64_t start_ns, int64_t duration_ns);

  void Apply(const PinnedChange& change);
  void OnEvent(const Event& event, const Outcome& outcome);
  // `grouper` merges each window's stacks by key before naming who allocated the most (null: per stack).
  PinnedResult Finish(const StackGrouper* grouper = nullptr);

 private:
  struct ThreadStack {
    uint32_t thread;
    uint64_t stack;
    bool operator==(const ThreadStack& o) const { return thread == o.thread && stack == o.stack; }
    template <typename H>
    friend H AbslHashValue(H h, const ThreadStack& k) {
      return H::combine(std::move(h), k.thread, k.stack);
    }
  };
  void AdvanceTo(int64_t time_ns);

  int64_t start_ns_;
  int64_t duration_ns_;
  int64_t bucket_ns_;
  PinnedResult result_;
  std::vector<absl::flat_hash_map<ThreadStack, uint64_t>> by_thread_stack_;  // per window
  size_t window_ = 0;  // current window
  size_t bucket_ = 0;  // current timeline bucket
  uint64_t bytes_ = 0;
  bool started_ = false;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_USAGE_PINNED_TRACKER_H_
