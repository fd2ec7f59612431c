// What the analysis keeps of PyTorch's caching-allocator layer (allocator_layer.h) once the trace is read: the
// attach, the config and what of it is modelled, per device the memory_stats() counters with their peaks and the
// tensors live at each peak, the figures at the end, and every TORCH_OOM with the figures its verdict needs. Plain
// data for reports; nothing here computes.
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_RESULT_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_RESULT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/torch/allocator_layer.h"
#include "analyzer/model/usage/owners.h"
#include "analyzer/model/stacks/grouped_snapshot.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

// A device's memory outside PyTorch's allocator at one moment: the other owners' live traced device memory.
struct OutsideOwner {
  OwnerName name;
  uint64_t bytes = 0;
};

// The allocator's state at a failure on one device, and what else held that device's memory.
struct TorchAtFailure {
  TorchFigures figures;
  uint64_t traced_device_bytes = 0;     // every owner's live device memory (the driver layer), PyTorch's included
  std::vector<OutsideOwner> outside;    // owners other than PyTorch with live device memory, largest first
};

struct TorchOomRecord {
  Event event;  // TORCH_OOM: size = the rounded request, aux = the device's free bytes the allocator saw
  uint64_t index = 0;
  uint64_t device_total_bytes = 0;  // the device's memory (header), 0 if unknown
  TorchAtFailure at;
  GroupedSnapshot tensors;            // live tensors (extents) by --group-by
  GroupedSnapshot tensors_by_python;  // ... by innermost Python frame
  GraphRetention retention;           // what kept the live tensors (autograd_passes.h)
};

struct TorchDeviceResult {
  TorchDeviceStats stats;  // counters and peaks (its freed_since_* lists are emptied)
  TorchFigures at_end;
  GroupedSnapshot at_allocated_peak;  // tensors live at allocated_bytes' peak (extents), by --group-by
  GroupedSnapshot at_reserved_peak;   // tensors live at reserved_bytes' peak
  GraphRetention retention_at_allocated_peak;  // what kept the tensors live at the allocated peak
};

struct AllocatorResult {
  bool attached = false;  // an AllocatorAttach packet
  AllocatorAttachInfo attach;
  AllocatorConfig config;
  bool events = false;    // TORCH_* events were seen
  std::vector<TorchDeviceResult> devices;  // by ordinal
  std::vector<TorchOomRecord> ooms;        // the first kMaxTorchOoms, in replay order
  uint64_t oom_count = 0;
  // TORCH_* events an allocator replay takes as steps (all but FREE_REQUESTED): what a replay would hold.
  uint64_t replay_steps = 0;
  uint64_t mismatches = 0;          // summed over devices
  uint64_t estimated_blocks = 0;
  uint64_t predating_frees = 0;

  const TorchDeviceResult* Find(int32_t device) const {
    for (const TorchDeviceResult& d : devices) {
      if (d.stats.device == device) return &d;
    }
    return nullptr;
  }
  // Extents are estimates: a setting not modelled, a layout the events disagreed with, or blocks of segments the
  // tracker never saw (attached after the first segment).
  bool estimate() const {
    return !config.unmodelled.empty() || mismatches != 0 || estimated_blocks != 0 ||
           (attached && !attach.at_first_segment);
  }
};

inline constexpr size_t kMaxTorchOoms = 1000;

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_RESULT_H_
