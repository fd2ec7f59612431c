// Reconciles the trace with the driver: MemorySample packets give each GPU's used memory (total - free) over time;
// at each sample this compares it with the device memory the trace holds live at that moment. What the trace does
// not explain is the CUDA context, other processes, or allocations the tool missed.
//
// Samples arrive in file order, events in sequence order; a sample's after_seq places it between them. Samples are
// held until the replay passes their after_seq (so "traced" counts exactly the events with seq <= after_seq); a
// sample whose after_seq the replay has already passed is evaluated at once (the nearest state still known).
// Memory grows with samples not yet reached and with devices, never with events or evaluated samples.
#ifndef CUMEMTRACE_ANALYZER_MODEL_USAGE_DRIVER_MEMORY_H_
#define CUMEMTRACE_ANALYZER_MODEL_USAGE_DRIVER_MEMORY_H_

#include <cstdint>
#include <map>
#include <queue>
#include <vector>

#include "analyzer/model/usage/owners.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

// Per GPU with samples. used = total - free; traced = live device + managed + pool + vmm_physical of that device
// at the sample; unexplained = used - traced (negative when traced memory exceeds what the driver reports used,
// e.g. another process freed memory between the sample and the events around it).
struct DriverMemory {
  int32_t device = 0;
  uint64_t samples = 0;
  uint64_t total_bytes = 0;  // the last sample's total
  uint64_t used_min = 0;
  uint64_t used_max = 0;
  uint64_t traced_at_max = 0;      // at the first sample with used_max
  int64_t unexplained_at_max = 0;  // used_max - traced_at_max
  int64_t unexplained_min = 0;
  int64_t unexplained_max = 0;
  int64_t unexplained_last = 0;    // at the sample with the largest after_seq (the latest in the file on ties)
};

class DriverMemoryTracker {
 public:
  // A sample as the reader delivers it; `live` says what is traced now (used only if the sample is late).
  void Add(const MemorySample& sample, const OwnerTracker& live);
  // Call before applying the event with sequence number `seq` (every event, in order): evaluates the samples
  // taken before it.
  void Before(uint64_t seq, const OwnerTracker& live) {
    if (!pending_.empty() && pending_.top().sample.after_seq < seq) Evaluate(seq, live);
    if (!any_event_ || seq > last_seq_) last_seq_ = seq;
    any_event_ = true;
  }
  // Evaluates what is left (samples after the last event) and returns one entry per device, by ordinal.
  std::vector<DriverMemory> Finish(const OwnerTracker& live);

 private:
  struct Pending {
    MemorySample sample;
    uint64_t arrival = 0;
    // A min-heap on (after_seq, arrival).
    bool operator<(const Pending& o) const {
      if (sample.after_seq != o.sample.after_seq) return sample.after_seq > o.sample.after_seq;
      return arrival > o.arrival;
    }
  };
  void Evaluate(uint64_t seq, const OwnerTracker& live);
  void Take(const MemorySample& sample, uint64_t arrival, uint64_t traced);

  std::priority_queue<Pending> pending_;
  uint64_t arrivals_ = 0;
  bool any_event_ = false;
  uint64_t last_seq_ = 0;
  struct PerDevice {
    DriverMemory result;
    uint64_t last_after_seq = 0;  // the key of the sample unexplained_last came from
    uint64_t last_arrival = 0;
  };
  std::map<int32_t, PerDevice> devices_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_USAGE_DRIVER_MEMORY_H_
