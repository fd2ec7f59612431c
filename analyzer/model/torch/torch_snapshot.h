// `cumem-analyze torch-snapshot`: the dictionary that PyTorch's torch.cuda.memory._snapshot() returns, rebuilt from
// the torch.* events of a trace (docs/format.md, "PyTorch's caching allocator"), so that PyTorch's own viewers
// (pytorch.org/memory_viz, python -m torch.cuda._memory_viz) open a cumemtrace trace. Two parts, as in PyTorch:
//
//   device_traces  per device, every allocator event in order (a torch.free row gives free_requested then
//                  free_completed), each with the stack of the allocation it concerns: a free carries the stack of
//                  the block it frees (as PyTorch does), a segment the stack of the driver allocation or mapping
//                  at its address. A free of a block the trace never allocated is left out (counted).
//   segments       the allocator's state at the end of the trace (or right after the event `until_seq`), read off
//                  the allocator layer (model/torch/allocator_layer.h), the one replay of PyTorch's allocator that every
//                  report uses: each segment (each contiguous mapped range for expandable segments) with its
//                  blocks, allocated, pending their free, and the layer's free blocks as inactive ones, tiling the
//                  segment exactly.
//
// Block extents are the layer's: reconstructed from PyTorch's rules (model/torch/allocator_rules.h) and the recorded
// PYTORCH_CUDA_ALLOC_CONF, and equal to PyTorch's on the H100 traces in examples/ (tests/golden). They are estimates
// where the layer says so, and the snapshot counts them: blocks the layer marks `estimated`, events its layout
// disagreed with (`mismatches`), settings it does not model, a tracker attached after the allocator's first
// segment. Segments the layer made up around blocks whose segment predates the tracker are left out, their blocks
// counted as stray.
//
// Reads the trace itself (one pass, the layer fed as the analysis feeds it): memory grows with the torch.* events,
// which are all kept for device_traces, with the live driver allocations (their stacks), and with what the layer
// keeps (live segments and blocks, the tensors live at its peaks); never with the other events.
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_TORCH_SNAPSHOT_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_TORCH_SNAPSHOT_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analyzer/model/stacks/python_frame_table.h"
#include "analyzer/model/stacks/stack_table.h"
#include "analyzer/model/stacks/symbol_table.h"
#include "analyzer/model/trace_info.h"

namespace cumemtrace::analyzer {

enum class BlockState : uint8_t { kActiveAllocated, kActivePendingFree, kInactive };

struct SnapshotBlock {
  uint64_t address = 0;
  uint64_t size = 0;            // the layer's extent
  uint64_t requested_size = 0;  // 0 for inactive blocks
  BlockState state = BlockState::kInactive;
  uint64_t stack = 0;
};

struct SnapshotSegment {
  int32_t device = 0;
  uint64_t address = 0;
  uint64_t total_size = 0;
  uint64_t allocated_size = 0;  // blocks active_allocated
  uint64_t active_size = 0;     // blocks active_allocated or active_pending_free
  uint64_t requested_size = 0;  // requested bytes of the active blocks
  uint64_t stream = 0;
  bool large = true;            // segment_type 'large' / 'small'
  bool is_expandable = false;
  uint64_t stack = 0;
  std::vector<SnapshotBlock> blocks;  // by address, tiling [address, address + total_size)
};

enum class TraceAction : uint8_t {
  kAlloc, kFreeRequested, kFreeCompleted, kSegmentAlloc, kSegmentFree, kSegmentMap, kSegmentUnmap, kOom,
};

// One device_traces entry.
struct SnapshotTraceEntry {
  TraceAction action = TraceAction::kAlloc;
  uint64_t addr = 0;  // kOom: the free bytes the allocator saw (device_free)
  uint64_t size = 0;  // alloc, oom: bytes requested; a free: the requested size of the block it frees
  uint64_t stream = 0;
  int64_t time_us = 0;  // microseconds since the Unix epoch
  uint64_t stack = 0;
};

// What of `segments` is an estimate, as the allocator layer reports it (all zero / empty / false: exact).
struct SnapshotEstimates {
  uint64_t estimated_blocks = 0;  // active blocks written whose extent the layer marks estimated
  uint64_t mismatches = 0;        // events the layer's layout disagreed with (extents near them are estimates)
  std::vector<std::string> unmodelled;  // PYTORCH_CUDA_ALLOC_CONF settings that change extents, not modelled
  bool attached_late = false;     // the tracker attached after the allocator's first segment
  bool any() const { return estimated_blocks != 0 || mismatches != 0 || !unmodelled.empty() || attached_late; }
};

// The largest device index PyTorch has (c10::DeviceIndex is an int8).
inline constexpr int32_t kMaxTorchDevice = 127;

struct TorchSnapshot {
  TraceInfo info;
  StackTable stacks;
  SymbolTable symbols;
  PythonFrameTable python_frames;
  std::vector<SnapshotSegment> segments;  // by device, then address
  std::vector<std::vector<SnapshotTraceEntry>> device_traces;  // by device ordinal, 0..largest seen
  uint64_t torch_events = 0;
  uint64_t unmatched_frees = 0;  // frees of a block never allocated in the trace (left out of device_traces)
  uint64_t stray_blocks = 0;     // active blocks outside every segment the trace saw (left out of segments)
  uint64_t foreign_device_events = 0;  // torch.* events of a device PyTorch cannot have (left out: a damaged trace)
  SnapshotEstimates estimates;
};

// Reads `path` up to and including the event with sequence number `until_seq` (every event by default). Errors:
// the reader's (an unreadable trace), and FailedPrecondition when the trace holds no torch.* event (one line saying
// why that may be).
absl::StatusOr<std::unique_ptr<TorchSnapshot>> BuildTorchSnapshot(
    const std::string& path, uint64_t until_seq = std::numeric_limits<uint64_t>::max());

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_TORCH_SNAPSHOT_H_
