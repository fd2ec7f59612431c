// The verdict on an out-of-memory inside PyTorch's caching allocator: which memory would have had to shrink for the
// request to fit, ranked by size. PyTorch prints "X is allocated by PyTorch, and R is reserved by PyTorch but
// unallocated"; by then it has released every cached segment it could, so R is cache in pieces (holes in split
// segments). The device is split into three parts:
//   outside PyTorch other owners (cuBLAS, NCCL, other libraries, the CUDA context, other processes);
//   live tensors    allocated by PyTorch;
//   fragmentation   reserved but unallocated: holes, none large enough for the request.
// The cause named is the largest part whose removal alone would let the request fit in the driver's free memory;
// when none would, the largest part, with what is still short. First, though: when the driver had the request free,
// PyTorch refused it itself, which only a per-process cap does (torch.cuda.set_per_process_memory_fraction): that
// is the cause, whatever the parts. Before that: a request at least as large as the card's whole memory fits
// whatever is freed never (larger_than_device). No advice is given here: what a setting would change is the allocator replay's
// to say (cumem-analyze whatif).
// The report computes the verdict and its figures; renderers only phrase them.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_OOM_VERDICT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_OOM_VERDICT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/torch/allocator_result.h"
#include "analyzer/model/trace_info.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

enum class OomCause : uint8_t { kFragmentation, kLiveTensors, kOutsidePytorch, kMemoryCap, kLargerThanDevice };
// "fragmentation", "live_tensors", "outside_pytorch", "memory_cap", "larger_than_device".
const char* OomCauseName(OomCause cause);

// The other processes on the failing device, as NVML listed them at (or last before) the failure.
struct OtherProcesses {
  bool listed = false;           // a list was taken (else `error` says why not, or nothing was asked: "")
  bool at_failure = false;       // taken right after the failure (else a periodic list before it)
  int64_t age_ns = 0;            // how long before the failure it was taken
  std::string error;
  GpuProcessesInfo::Pids pids = GpuProcessesInfo::Pids::kUnknown;
  std::vector<GpuProcessInfo> others;  // largest first; the traced process left out
  uint64_t others_bytes = 0;
};

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
  OtherProcesses processes;                 // filled by the report (OtherProcessesAt), not by JudgeOom
  bool expandable_segments = false;         // already on
  uint64_t shortfall_bytes = 0;             // request - free - reserved_unallocated (what the cache could not give)
  // The cause's part alone is enough: free + its bytes >= the request (else `still_short` bytes more are needed).
  bool cause_suffices = false;
  uint64_t still_short_bytes = 0;
};

// `total` 0 when unknown; `has_free` false when the driver's free memory is unknown.
// The other processes on `device` at event `seq`'s failure (seq's own list when there is one) at `time_ns`.
OtherProcesses OtherProcessesAt(const TraceInfo& info, int32_t device, uint64_t seq, int64_t time_ns);

OomVerdict JudgeOom(uint64_t request, bool has_free, uint64_t driver_free, uint64_t total, const TorchAtFailure& at,
                    bool expandable_segments);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_OOM_VERDICT_H_
