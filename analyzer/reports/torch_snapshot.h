// `cumem-analyze torch-snapshot`: the dictionary that PyTorch's torch.cuda.memory._snapshot() returns, rebuilt from
// the torch.* events of a trace (docs/format.md, "PyTorch's caching allocator"), so that PyTorch's own viewers
// (pytorch.org/memory_viz, python -m torch.cuda._memory_viz) open a cumemtrace trace. Two parts, as in PyTorch:
//
//   device_traces  per device, every allocator event in order (a torch.free row gives free_requested then
//                  free_completed), each with the stack of the allocation it concerns: a free carries the stack of
//                  the block it frees (as PyTorch does), a segment the stack of the driver allocation or mapping
//                  at its address. A free of a block the trace never allocated is left out (counted).
//   segments       the allocator's state at the end of the trace: each segment (each contiguous mapped range for
//                  expandable segments) with the blocks live then, and the gaps between them as inactive blocks,
//                  so that the blocks tile each segment exactly.
//
// The trace knows each block's address and requested size, not the size PyTorch rounded it to. A block's size is
// estimated as PyTorch rounds (512 B multiples, at least 512 B), stretched over a gap after it of at most 1 MiB in a
// large-pool segment that is not expandable (PyTorch leaves such a remainder unsplit there; a free large-pool block is
// always larger). With
// roundup_power2_divisions or max_split_size_mb set, PyTorch's blocks can be larger still: the difference then
// shows as inactive space instead of rounding, and totals (reserved, requested) stay exact either way.
//
// Reads the trace itself (one pass, its own replay): memory grows with the torch.* events, which are all kept.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_TORCH_SNAPSHOT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_TORCH_SNAPSHOT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analyzer/model/python_frame_table.h"
#include "analyzer/model/stack_table.h"
#include "analyzer/model/symbol_table.h"
#include "analyzer/model/trace_info.h"

namespace cumemtrace::analyzer {

enum class BlockState : uint8_t { kActiveAllocated, kActivePendingFree, kInactive };

struct SnapshotBlock {
  uint64_t address = 0;
  uint64_t size = 0;            // estimated (see above); inactive blocks: the gap
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

struct TorchSnapshot {
  TraceInfo info;
  StackTable stacks;
  SymbolTable symbols;
  PythonFrameTable python_frames;
  std::vector<SnapshotSegment> segments;  // by device, then address
  std::vector<std::vector<SnapshotTraceEntry>> device_traces;  // by device ordinal, 0..largest seen
  uint64_t torch_events = 0;
  uint64_t unmatched_frees = 0;  // frees of a block never allocated in the trace (left out of device_traces)
  uint64_t stray_blocks = 0;     // blocks live at the end outside every live segment (left out of segments)
};

// Reads `path`. Errors: the reader's (an unreadable trace), and FailedPrecondition when the trace holds no torch.*
// event (one line saying why that may be).
absl::StatusOr<std::unique_ptr<TorchSnapshot>> BuildTorchSnapshot(const std::string& path);

// PyTorch's block size for `requested` bytes with its default settings (512 B multiples, at least 512 B).
uint64_t RoundedBlockSize(uint64_t requested);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_TORCH_SNAPSHOT_H_
