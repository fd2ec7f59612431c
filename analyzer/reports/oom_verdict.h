// The verdict on an out-of-memory inside PyTorch's caching allocator: which memory would have had to shrink for the
// request to fit. PyTorch prints "X is allocated by PyTorch, and R is reserved by PyTorch but unallocated"; by then
// it has released every cached segment it could, so R is cache in pieces (split segments). Three causes, judged
// from the figures alone:
//   fragmentation   R + the driver's free memory would hold the request, but no cached block is large enough;
//   live tensors    even a perfect cache is short, and the tensors live then are the largest holder;
//   outside PyTorch other owners (cuBLAS, NCCL, other libraries, the CUDA context, other processes) hold more.
// The report computes the verdict and its figures; renderers only phrase them.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_OOM_VERDICT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_OOM_VERDICT_H_

#include <cstdint>
#include <vector>

#include "analyzer/model/torch/allocator_result.h"

namespace cumemtrace::analyzer {

enum class OomCause : uint8_t { kFragmentation, kLiveTensors, kOutsidePytorch };
// "fragmentation", "live_tensors", "outside_pytorch".
const char* OomCauseName(OomCause cause);

struct OomVerdict {
  OomCause cause = OomCause::kLiveTensors;
  uint64_t request_bytes = 0;
  bool has_driver_free = false;
  uint64_t driver_free_bytes = 0;
  uint64_t device_total_bytes = 0;  // 0: unknown
  uint64_t allocated_bytes = 0;     // PyTorch's "allocated by PyTorch"
  uint64_t reserved_bytes = 0;
  uint64_t reserved_unallocated_bytes = 0;  // PyTorch's "reserved by PyTorch but unallocated"
  uint64_t largest_free_block = 0;          // the largest free block cached
  uint64_t pending_free_bytes = 0;
  uint64_t tensors = 0;                     // live tensors
  uint64_t outside_traced_bytes = 0;        // other owners' traced device memory
  bool has_outside_untraced = false;        // total and free known
  uint64_t outside_untraced_bytes = 0;      // used - traced: the CUDA context, other processes, missed calls
  std::vector<OutsideOwner> outside;        // other owners, largest first
  bool expandable_segments = false;         // already on
  uint64_t shortfall_bytes = 0;             // request - free - reserved_unallocated (what the cache could not give)
};

// `total` 0 when unknown; `has_free` false when the driver's free memory is unknown.
OomVerdict JudgeOom(uint64_t request, bool has_free, uint64_t driver_free, uint64_t total, const TorchAtFailure& at,
                    bool expandable_segments);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_OOM_VERDICT_H_
