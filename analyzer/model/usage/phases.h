// The program's phases in the model: NVTX ranges from the trace (Phase packets), or a time window given on the
// command line. Why it exists: "peak per phase" (train vs validate), "which phase was running at this OOM / made
// this leak", and reports narrowed to one phase all need the same thing, the set of ranges open at each event.
//
// Phases arrive in file order and are placed among the events by after_seq (events with after_seq < seq come after
// the transition), so they are queued until the replay reaches them. Per (thread, domain) a stack of pushed ranges;
// start/end ranges by id. A phase is a name: its peak is the highest value each (device, series) reached while any
// range of that name was open on any thread, counting the value at the moment it opened (as PyTorch's
// reset_peak_memory_stats() at a phase boundary does). For PyTorch traces the allocator's reserved bytes (the
// segments of the torch.* events) are one more series, kTorchReservedSeries: what max_memory_reserved() reports.
//
// A filter (--phase NAME, or --window START_MS:END_MS as a phase of its own) opens and closes the timelines' peak
// gate, so every report's peaks, OOMs and leaks are those inside it.
#ifndef CUMEMTRACE_ANALYZER_MODEL_USAGE_PHASES_H_
#define CUMEMTRACE_ANALYZER_MODEL_USAGE_PHASES_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analyzer/model/memory/timelines.h"
#include "analyzer/model/torch/allocator_layer.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

// Series beyond the timelines' own, per device: PyTorch's reserved bytes (torch.segment_* events), and its tensors'
// allocated bytes (block extents) and requested bytes, as the allocator layer counts them: what
// max_memory_reserved(), max_memory_allocated() and memory_stats()'s requested_bytes peak report.
inline constexpr int kTorchReservedSeries = kNumSeries;
inline constexpr int kTorchAllocatedSeries = kNumSeries + 1;
inline constexpr int kTorchRequestedSeries = kNumSeries + 2;

// The NVTX domain of ranges the analyzer found itself (training and validation told apart by backward passes:
// torch/step_phases.h), fed to the tracker like the program's own.
inline constexpr uint32_t kDetectedPhaseDomain = 0xffffffffu;

// "device", ..., "total", "torch_reserved", "torch_allocated" and "torch_requested".
const char* PhaseSeriesName(int series);

struct PhaseFilter {
  std::string phase;          // a range name; empty: none
  bool has_window = false;    // --window: [start_ms, end_ms) after the trace's start
  int64_t window_start_ms = 0;
  int64_t window_end_ms = 0;
  bool active() const { return !phase.empty() || has_window; }
  std::string Label() const;  // the phase name, or "window START:END ms"
};

struct PhasePeak {
  int32_t device = 0;
  int series = 0;             // a timelines series or one of the kTorch*Series
  uint64_t peak_bytes = 0;
  EventStamp at;              // the event that reached it (or the last one before the phase opened)
};

struct PhaseSummary {
  std::string name;
  uint64_t occurrences = 0;   // ranges of that name opened
  int64_t first_ns = 0;       // when the first opened
  int64_t total_ns = 0;       // summed duration of its ranges (nested ones of the same name counted once each)
  std::vector<PhasePeak> peaks;  // by device, then series
};

struct PhaseRange {
  std::string name;
  std::string path;           // enclosing ranges of its thread and domain, outermost first: "train/step"
  uint32_t thread = 0;
  uint32_t domain = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;         // the trace's end for a range never closed
  uint64_t begin_seq = 0;     // events with begin_seq < seq <= end_seq ran inside
  uint64_t end_seq = 0;
  bool closed = false;
  bool stacked = true;        // pushed on its thread's stack (false: a start/end range, free to overlap)
};

struct PhaseResults {
  std::vector<PhaseSummary> phases;  // in the order first opened
  std::vector<PhaseRange> ranges;    // every range, in the order opened (at most kMaxRanges kept)
  uint64_t ranges_dropped = 0;
  uint64_t marks = 0;
  uint64_t unmatched_closes = 0;     // a pop or end with nothing open to close
  bool detected = false;             // the ranges were found by the analyzer (kDetectedPhaseDomain), not NVTX's
  bool filter_active = false;
  std::string filter_label;
  uint64_t filter_events = 0;        // events inside the filter
};

class PhaseTracker {
 public:
  static constexpr size_t kMaxRanges = 100000;

  explicit PhaseTracker(const PhaseFilter& filter) : filter_(filter) {}

  // True when the replay must call Before() for every event.
  bool active() const { return seen_any_ || filter_.active(); }
  // Whether the trace (or the analyzer, kDetectedPhaseDomain) gave any phase transition.
  bool seen_any() const { return seen_any_; }
  void Add(const PhaseInfo& phase);
  // A transition the analyzer found itself (torch/step_phases.h): the results say the phases were detected.
  void AddDetected(const PhaseInfo& phase) {
    detected_ = true;
    Add(phase);
  }
  // Applies the transitions that happened before `event` (index = its replay position), then moves the
  // timelines' gate for the filter. Call before the memory model applies the event.
  void Before(const Event& event, uint64_t index, int64_t start_ns, Timelines& timelines);
  // After the memory model applied `event`: raises the open phases' peaks.
  void After(const Event& event, uint64_t index, const Timelines& timelines);
  // After the allocator layer applied a TORCH_* event on `device`: its reserved, allocated and requested bytes now
  // (`grew`: a block allocation or a segment's growth, which may raise the open phases' peaks).
  void Torch(int32_t device, const TorchBytes& now, bool grew);
  // Before the first phase, when the replay has applied events without the tracker: `last` is the last of them,
  // `devices` what PyTorch's allocator held after it. A phase opening next counts those bytes (it opens with them).
  void CatchUp(const EventStamp& last, const std::vector<std::pair<int32_t, TorchBytes>>& devices);
  // The filter's verdict for the event at `index` (always true without a filter).
  bool Inside(uint64_t index) const;
  // The innermost open range's path on `thread` (else the most recently opened range still open anywhere), or "".
  std::string CurrentPhase(uint32_t thread) const;
  // The phase that was current (as CurrentPhase without a thread) when the event at `index` ran, or "".
  std::string PhaseAt(uint64_t index) const;
  // Closes what is still open at the trace's end.
  PhaseResults Finish(int64_t end_ns, uint64_t next_index, Timelines& timelines);

 private:
  struct Open {
    size_t range;       // index into ranges_ (or SIZE_MAX when dropped)
    std::string name;
    std::string path;
    int64_t begin_ns;
    uint64_t order;     // when opened, for "most recent"
    uint32_t thread;
  };
  void Apply(const PhaseInfo& phase, uint64_t index, Timelines& timelines);
  void OpenRange(const PhaseInfo& phase, std::vector<Open>* stack, uint64_t index, const Timelines& timelines);
  void CloseRange(Open open, int64_t end_ns, uint64_t end_seq, uint64_t index, Timelines& timelines);
  void NameOpened(const std::string& name, int64_t time_ns, uint64_t index, const Timelines& timelines);
  void Raise(PhaseSummary& s, int32_t device, int series, uint64_t bytes, const EventStamp& at);
  void RaiseTorch(PhaseSummary& s, int32_t device, const TorchBytes& now);
  void SetGate(bool open, uint64_t index, Timelines& timelines);
  void NoteCurrentChanged(uint64_t index);
  std::string MostRecentPath() const;

  PhaseFilter filter_;
  bool seen_any_ = false;
  bool detected_ = false;
  std::deque<PhaseInfo> queue_;  // by after_seq, stable
  std::map<std::pair<uint32_t, uint32_t>, std::vector<Open>> stacks_;  // (thread, domain)
  absl::flat_hash_map<uint64_t, Open> started_;                      // start/end ranges by id
  absl::flat_hash_map<std::string, size_t> summary_of_;
  std::vector<PhaseSummary> summaries_;
  absl::flat_hash_map<std::string, int> open_names_;  // ranges of each name open now
  std::vector<size_t> open_summaries_;                // summaries_ indices with open ranges
  std::vector<PhaseRange> ranges_;
  uint64_t ranges_dropped_ = 0;
  uint64_t marks_ = 0;
  uint64_t unmatched_ = 0;
  uint64_t order_ = 0;
  EventStamp last_;                                   // the last event applied
  absl::flat_hash_map<int32_t, TorchBytes> torch_;    // per device, as the allocator layer counts them
  // The filter: whether it is open now, and the replay intervals [begin, end) it was open.
  bool gate_started_ = false;
  bool gate_open_ = false;
  bool closing_at_end_ = false;  // Finish(): ranges still open end with the trace, unclosed
  std::vector<std::pair<uint64_t, uint64_t>> gate_spans_;
  uint64_t filter_events_ = 0;
  // The current phase over the replay: (first index, path) each time it changed.
  std::vector<std::pair<uint64_t, std::string>> current_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_USAGE_PHASES_H_
