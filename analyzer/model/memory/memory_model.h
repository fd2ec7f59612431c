// Replays events onto the live set and the timelines: the one place that decides what an event does to memory.
// Both analysis passes and the events dump run this same code, so they agree on every byte.
//
// Rules: a successful allocation inserts (replacing, and counting as overwritten, one already live at the same
// address in the same space); a successful free removes the live allocation of its space and address (an unknown
// one is counted as an unmatched free, unless it is a PyTorch block that predates the tracker); a failed allocation changes nothing (reports list it); a failed free leaves
// the allocation live. It must never crash or go negative on a trace that frees what it never allocated.
#ifndef CUMEMTRACE_ANALYZER_MODEL_MEMORY_MEMORY_MODEL_H_
#define CUMEMTRACE_ANALYZER_MODEL_MEMORY_MEMORY_MODEL_H_

#include <cstdint>

#include "analyzer/model/memory/live_set.h"
#include "analyzer/model/memory/timelines.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

enum class Effect : uint8_t {
  kNone,           // an api that neither allocates nor frees
  kAllocated,      // inserted
  kReplaced,       // inserted over a live allocation at the same address (`previous`)
  kFreed,          // removed `previous`
  kUnmatchedFree,  // a successful free of nothing live
  kFailedAlloc,    // result != 0: nothing changed
  kFailedFree,     // result != 0: nothing changed; `previous` is the allocation still live there, if any
};

struct Outcome {
  Effect effect = Effect::kNone;
  bool has_previous = false;
  Allocation previous;
};

struct ModelStats {
  uint64_t events = 0;
  uint64_t allocations = 0;  // successful
  uint64_t frees = 0;        // successful and matched
  uint64_t overwritten = 0;  // allocations at an address already live (the older one was dropped)
  uint64_t unmatched_frees = 0;
  // Frees of PyTorch blocks allocated before its allocator's tracker was attached (TORCH_FREE_REQUESTED of nothing
  // live): expected, never counted in unmatched_frees.
  uint64_t predating_torch_frees = 0;
  uint64_t failed_allocations = 0;
  uint64_t failed_frees = 0;
};

class MemoryModel {
 public:
  // Applies `event` (the next one in replay order) and says what it did.
  Outcome Apply(const Event& event);
  // A hint that `event` will be applied soon (see ApplyAll).
  void Prefetch(const Event& event) const {
    if (event.info != nullptr) live_.Prefetch(event.info->space, event.address);
  }
  // Applies `events` in order, calling after(event, outcome, index) after each, with the live set's memory
  // fetched a few events ahead (the live set is larger than the caches on long runs).
  template <typename After>
  void ApplyAll(absl::Span<const Event> events, After&& after) {
    constexpr size_t kAhead = 8;
    for (size_t i = 0; i < events.size() && i < kAhead; ++i) Prefetch(events[i]);
    for (size_t i = 0; i < events.size(); ++i) {
      if (i + kAhead < events.size()) Prefetch(events[i + kAhead]);
      const uint64_t index = next_index();
      const Outcome outcome = Apply(events[i]);
      after(events[i], outcome, index);
    }
  }

  // The replay position the next event gets (= events applied so far).
  uint64_t next_index() const { return stats_.events; }
  const LiveSet& live() const { return live_; }
  const Timelines& timelines() const { return timelines_; }
  Timelines& mutable_timelines() { return timelines_; }  // for the phase gate (phases.h)
  const ModelStats& stats() const { return stats_; }

 private:
  LiveSet live_;
  Timelines timelines_;
  ModelStats stats_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_MEMORY_MEMORY_MODEL_H_
