// The segment/block map of PyTorch's caching allocator at any moment of a trace, for views that show it (the HTML
// report's allocator-state view): the trace is replayed up to that moment and the layer's map read off. Memory is
// that of one replay (live segments and blocks), never a history of maps; a view that needs several moments
// replays once per moment.
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_MAP_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_MAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analyzer/model/torch/allocator_layer.h"

namespace cumemtrace::analyzer {

struct AllocatorMap {
  uint64_t last_seq = 0;      // the last event applied (seq <= the moment asked for)
  uint64_t events = 0;        // TORCH_* events applied
  TorchFigures figures;       // of `device` then
  std::vector<TorchSegmentView> segments;  // of `device`, by address
};

// Reads `path` and returns PyTorch's segments and blocks on `device` right after the event with sequence number
// `seq` (every event with a sequence number <= seq applied, in replay order). Errors are the reader's.
absl::StatusOr<AllocatorMap> AllocatorMapAt(const std::string& path, int32_t device, uint64_t seq);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_MAP_H_
