// The model of one trace, built by reading it once: metadata, stacks and symbols, the timelines' peaks with the
// live allocations at each peak grouped by stack (exact, see timelines.h), what was live at the end (leaks), the
// failed allocations with what was live then, and the pinned host memory windows. Reports read only this; nothing
// here formats output. A second read happens only when the pinned host changes outgrow their log.
//
// Memory grows with live allocations, unique stacks, threads and symbols, and is bounded for failed allocations
// (AnalyzeOptions::max_oom_records) and pinned changes (max_pinned_log), never with the number of events.
#ifndef CUMEMTRACE_ANALYZER_MODEL_ANALYSIS_H_
#define CUMEMTRACE_ANALYZER_MODEL_ANALYSIS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analyzer/model/torch/allocator_result.h"
#include "analyzer/model/usage/driver_memory.h"
#include "analyzer/model/memory/memory_model.h"
#include "analyzer/model/usage/owners.h"
#include "analyzer/model/usage/phases.h"
#include "analyzer/model/usage/pinned_tracker.h"
#include "analyzer/model/stacks/python_frame_table.h"
#include "analyzer/model/stacks/stack_grouper.h"
#include "analyzer/model/stacks/grouped_snapshot.h"
#include "analyzer/model/stacks/stack_table.h"
#include "analyzer/model/stacks/symbol_table.h"
#include "analyzer/model/memory/timelines.h"
#include "analyzer/model/trace_info.h"

namespace cumemtrace::analyzer {

// Where PyTorch's allocator is replayed during the scan (model/torch/layer_thread.h).
enum class LayerThreading {
  kAuto,       // kOwnThread where the process may use three CPUs or more (the reader's, the model's, the layer's),
               // kShared on two, kInline on one
  kOwnThread,  // always on a thread of its own
  kShared,     // applied by the reader's thread while it waits for the model's, else by the model's
  kInline,     // on the model's thread
};

struct AnalyzeOptions {
  bool peak_snapshots = true;   // group what was live at each peak by stack
  bool oom_snapshots = true;    // group what was live at failed allocations by stack
  bool pinned = true;           // pinned host windows and timeline
  size_t max_groups = 1000;     // stack groups kept per snapshot, largest first
  size_t max_oom_records = 100000;  // failed allocations kept: the first half and the last half
  // Failed allocations get a snapshot of what was live: the first `oom_snapshot_first` always; later ones when
  // the live set is unchanged since the last snapshot (shared), or when at least as many events as live
  // allocations went by since it (so snapshots cost at most one visited allocation per event).
  size_t oom_snapshot_first = 100;
  size_t max_pinned_log = size_t{1} << 20;  // pinned changes kept for the end; beyond: a second read
  PhaseFilter phase_filter;  // --phase / --window: peaks, OOMs and leaks inside it only (phases.h)
  // Count every successful allocation and its bytes per (device, kind, stack) over the whole run (diff's churn).
  // Off by default: one hash lookup per allocation.
  bool allocation_totals = false;
  GroupingOptions grouping;  // how snapshots, leaks and pinned spikes merge stacks (default: one group per stack)
  LayerThreading layer_thread = LayerThreading::kAuto;
  // Called now and then with the events read so far and the share of the file read (negative: not known yet, or a
  // file whose size is unknown); may be empty.
  std::function<void(uint64_t events, double fraction)> progress;
  // Called before a second read of the trace, with what it is for (may be empty).
  std::function<void(const std::string&)> progress_stage;
};

// One (device, series) timeline: its final state and peak, and what was live at the peak.
struct PeakResult {
  int32_t device = 0;
  int series = 0;  // static_cast<int>(format::Kind), or kDeviceTotalSeries
  Series counter;
  GroupedSnapshot at_peak;  // taken when AnalyzeOptions::peak_snapshots and peak_bytes > 0
};

inline constexpr int kGrowthPoints = 4;

struct LeakGroup {
  int32_t device = 0;
  format::Kind kind = format::Kind::kUnknown;
  uint64_t stack = 0;   // the group's largest stack
  uint64_t bytes = 0;
  uint64_t count = 0;
  GroupKey key;
  uint64_t stacks = 1;  // distinct stacks merged
  // Device memory that PyTorch's caching allocator holds as segments, on a device where the trace has the
  // allocator layer: the cache it kept (its live tensors are the torch_block groups), not a leak.
  bool pytorch_cache = false;
  // Of the bytes live at the end, those already allocated at 1/4, 1/2 and 3/4 of the trace and at its end (the
  // last = bytes): a loop that keeps something every step reads as a steady climb, a one-time allocation as flat.
  std::array<uint64_t, kGrowthPoints> growth{};
  std::string phase;    // the phase current when the largest stack's first allocation found was made ("": none)
};

// Allocations made over the run from one stack, of one kind on one device (AnalyzeOptions::allocation_totals).
struct AllocationTotal {
  int32_t device = 0;
  format::Kind kind = format::Kind::kUnknown;
  uint64_t stack = 0;
  uint64_t count = 0;
  uint64_t bytes = 0;
};

struct LeakTotal {
  int32_t device = 0;
  format::Kind kind = format::Kind::kUnknown;
  uint64_t bytes = 0;
  uint64_t count = 0;
};

struct OomRecord {
  Event event;        // the failed request (event.size = requested bytes)
  uint64_t index = 0;  // replay position
  SnapshotFilter scope;         // whose live memory `live_bytes` counts
  uint64_t live_bytes = 0;      // traced live bytes in that scope at the failure
  uint64_t live_count = 0;
  GroupedSnapshot live_by_stack;  // taken per AnalyzeOptions::oom_snapshot_first
  std::string phase;              // the failing thread's innermost open phase, else any open one ("": none)
  // A failure PyTorch's caching allocator asked for (its stack's owner is PyTorch) on a device with the allocator
  // layer: the allocator's state then.
  bool has_torch = false;
  TorchAtFailure torch;
  // PyTorch's allocator went on to serve the request anyway (it released cache and asked again): a step of its
  // retry, not a failure the program saw.
  bool recovered = false;
};

struct Analysis {
  TraceInfo info;
  StackTable stacks;
  SymbolTable symbols;
  PythonFrameTable python_frames;
  // Keys stacks into groups (AnalyzeOptions::grouping) and names their user frames; set once the read is done.
  // Reports may call it on a const Analysis: it only fills its own caches.
  std::unique_ptr<StackGrouper> grouper;
  // Keys stacks by their innermost Python frame (--group-by python), for the views that always group so.
  std::unique_ptr<StackGrouper> python_grouper;
  ModelStats model;
  // Every (device, series) with at least one allocation: by device ordinal, then kind order, the device total
  // last.
  std::vector<PeakResult> peaks;
  // Live at the end, by (device, kind, group key): memory kinds largest first, then vmm_mapped and
  // address_reserve.
  std::vector<LeakGroup> leaks;
  std::vector<LeakTotal> leak_totals;  // live at the end, by (device, kind)
  std::vector<AllocationTotal> allocation_totals;  // when asked for, by (device, kind, stack)
  std::vector<OomRecord> ooms;         // in replay order
  uint64_t oom_count = 0;              // all failed allocations, kept or not
  PinnedResult pinned;
  std::vector<OwnerUsage> owners;            // memory by owner per device (owners.h)
  std::vector<DriverMemory> driver_memory;  // per GPU with MemorySample packets (driver_memory.h)
  PhaseResults phases;                      // NVTX ranges, peaks per phase, the filter (phases.h)
  // Training and validation found in a trace without NVTX ranges (torch/step_phases.h), as phase transitions: read
  // by Analyze(), which places them among the events in a second read.
  std::vector<PhaseInfo> detected_phases;
  AllocatorResult allocator;  // PyTorch's caching allocator's blocks (allocator_result.h); empty without them
  bool second_pass = false;  // the pinned changes outgrew their log and the trace was read again

  // nullptr if (device, series) had no allocation.
  const PeakResult* FindPeak(int32_t device, int series) const;
};

// Reads the trace at `path` into an Analysis. Errors are the reader's (see trace_reader.h).
absl::StatusOr<std::unique_ptr<Analysis>> Analyze(const std::string& path, const AnalyzeOptions& options);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_ANALYSIS_H_
