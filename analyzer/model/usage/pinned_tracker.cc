// PinnedTracker: windows, rises, attribution and timeline of live pinned host memory. Must never allocate per
// event beyond the per-window (thread, stack) sums.
#include "analyzer/model/usage/pinned_tracker.h"

#include <algorithm>

#include "analyzer/model/trace_info.h"

namespace cumemtrace::analyzer {
namespace {

struct Sum {
  uint64_t bytes = 0;
  uint64_t stacks = 0;
  uint64_t largest_stack = 0;
  uint64_t largest_bytes = 0;
};

struct ThreadKey {
  uint32_t thread;
  GroupKey key;
  bool operator==(const ThreadKey& o) const { return thread == o.thread && key == o.key; }
  template <typename H>
  friend H AbslHashValue(H h, const ThreadKey& k) {
    return H::combine(std::move(h), k.thread, k.key);
  }
};

}  // namespace

PinnedTracker::PinnedTracker(int64_t start_ns, int64_t duration_ns)
    : start_ns_(start_ns), duration_ns_(std::max<int64_t>(0, duration_ns)) {
  result_.computed = true;
  result_.window_ns = std::max(kMinWindowNs, duration_ns_ / kWindowsPerTrace);
  const size_t windows = static_cast<size_t>(duration_ns_ / result_.window_ns) + 1;
  result_.windows.resize(windows);
  for (size_t i = 0; i < windows; ++i) {
    result_.windows[i].start_ns = static_cast<int64_t>(i) * result_.window_ns;
    // The last window of a trace whose times span all of int64 ends past INT64_MAX.
    result_.windows[i].end_ns = SaturatingAdd(result_.windows[i].start_ns, result_.window_ns);
  }
  by_thread_stack_.resize(windows);
  bucket_ns_ = std::max<int64_t>(1, duration_ns_ / kTimelinePoints + (duration_ns_ % kTimelinePoints != 0));
  result_.timeline.resize(kTimelinePoints);
  for (int i = 0; i < kTimelinePoints; ++i) result_.timeline[i].time_ns = static_cast<int64_t>(i) * bucket_ns_;
}

void PinnedTracker::AdvanceTo(int64_t time_ns) {
  // Events are in seq order, which times follow only roughly: never move back to an earlier window.
  const int64_t rel = std::max<int64_t>(0, SaturatingSub(time_ns, start_ns_));
  const size_t window = std::min<size_t>(static_cast<size_t>(rel / result_.window_ns), result_.windows.size() - 1);
  const size_t bucket = std::min<size_t>(static_cast<size_t>(rel / bucket_ns_), kTimelinePoints - 1);
  if (!started_) {
    started_ = true;
    for (size_t w = 0; w <= window; ++w) result_.windows[w].start_bytes = result_.windows[w].max_bytes = 0;
    window_ = window;
    bucket_ = bucket;
    return;
  }
  for (size_t w = window_ + 1; w <= window; ++w) result_.windows[w].start_bytes = result_.windows[w].max_bytes = bytes_;
  for (size_t b = bucket_ + 1; b <= bucket; ++b) result_.timeline[b].bytes = bytes_;
  window_ = std::max(window_, window);
  bucket_ = std::max(bucket_, bucket);
}

void PinnedTracker::Apply(const PinnedChange& c) {
  AdvanceTo(c.time_ns);
  PinnedWindow& w = result_.windows[window_];
  if (c.up) {
    bytes_ += c.bytes;
    ++result_.allocations;
    result_.allocated_bytes += c.bytes;
    ++w.allocations;
    w.allocated_bytes += c.bytes;
    by_thread_stack_[window_][ThreadStack{c.thread, c.stack}] += c.bytes;
    if (bytes_ > result_.peak_bytes) {
      result_.peak_bytes = bytes_;
      result_.peak_time_ns = SaturatingSub(c.time_ns, start_ns_);
      result_.peak_seq = c.seq;
    }
  } else {
    bytes_ -= c.bytes;
  }
  w.max_bytes = std::max(w.max_bytes, bytes_);
  TimelinePoint& p = result_.timeline[bucket_];
  p.bytes = std::max(p.bytes, bytes_);
}

int PinnedChanges(const Event& event, const Outcome& outcome, PinnedChange out[2]) {
  const bool alloc_pinned = event.info->kind == format::Kind::kPinnedHost;
  const bool previous_pinned = outcome.has_previous && outcome.previous.kind == format::Kind::kPinnedHost;
  const bool adds = (outcome.effect == Effect::kAllocated || outcome.effect == Effect::kReplaced) && alloc_pinned;
  const bool drops = (outcome.effect == Effect::kFreed || outcome.effect == Effect::kReplaced) && previous_pinned;
  int n = 0;
  if (drops) out[n++] = PinnedChange{event.time_ns, event.seq, event.stack, outcome.previous.size, event.thread, false};
  if (adds) out[n++] = PinnedChange{event.time_ns, event.seq, event.stack, event.size, event.thread, true};
  return n;
}

void PinnedTracker::OnEvent(const Event& event, const Outcome& outcome) {
  PinnedChange changes[2];
  const int n = PinnedChanges(event, outcome, changes);
  for (int i = 0; i < n; ++i) Apply(changes[i]);
}

PinnedResult PinnedTracker::Finish(const StackGrouper* grouper) {
  // Windows and buckets after the last change hold the final value.
  for (size_t w = started_ ? window_ + 1 : 0; w < result_.windows.size(); ++w) {
    result_.windows[w].start_bytes = result_.windows[w].max_bytes = bytes_;
  }
  for (size_t b = started_ ? bucket_ + 1 : 0; b < result_.timeline.size(); ++b) result_.timeline[b].bytes = bytes_;
  for (size_t i = 0; i < result_.windows.size(); ++i) {
    PinnedWindow& w = result_.windows[i];
    w.rise_bytes = w.max_bytes - w.start_bytes;
    // Per thread: the window's stacks merged by key, each remembering its largest stack.
    absl::flat_hash_map<ThreadKey, Sum> sums;
    for (const auto& [ts, bytes] : by_thread_stack_[i]) {
      const GroupKey key = grouper == nullptr ? GroupKey{GroupKey::Kind::kStack, ts.stack} : grouper->KeyOf(ts.stack);
      Sum& sum = sums[ThreadKey{ts.thread, key}];
      sum.bytes += bytes;
      ++sum.stacks;
      if (sum.stacks == 1 || bytes > sum.largest_bytes ||
          (bytes == sum.largest_bytes && ts.stack < sum.largest_stack)) {
        sum.largest_bytes = bytes;
        sum.largest_stack = ts.stack;
      }
    }
    for (const auto& [tk, sum] : sums) {
      const bool better = sum.bytes > w.top_allocated_bytes ||
                          (sum.bytes == w.top_allocated_bytes &&
                           (tk.thread < w.top_thread || (tk.thread == w.top_thread && tk.key < w.top_key)));
      if (better) {
        w.top_allocated_bytes = sum.bytes;
        w.top_thread = tk.thread;
        w.top_key = tk.key;
        w.top_stack = sum.largest_stack;
        w.top_stacks = sum.stacks;
      }
    }
  }
  result_.final_bytes = bytes_;
  by_thread_stack_.clear();
  return std::move(result_);
}

}  // namespace cumemtrace::analyzer
