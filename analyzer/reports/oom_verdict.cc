// JudgeOom (see oom_verdict.h). Must never underflow: every difference is clamped at zero.
#include "analyzer/reports/oom_verdict.h"

namespace cumemtrace::analyzer {
namespace {

uint64_t Minus(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

}  // namespace

OtherProcesses OtherProcessesAt(const TraceInfo& info, int32_t device, uint64_t seq, int64_t time_ns) {
  OtherProcesses p;
  const GpuProcessesInfo* list = info.GpuProcessesAt(device, seq);
  if (list == nullptr) return p;
  p.age_ns = time_ns > list->time_ns ? time_ns - list->time_ns : 0;
  // Lists at failures come at most once a second per device: an older one belongs to another failure.
  p.at_failure = list->reason == GpuProcessesInfo::Reason::kFailedAllocation && p.age_ns <= 1000000000;
  p.error = list->error;
  p.listed = list->error.empty();
  p.pids = list->pids;
  for (const GpuProcessInfo& process : list->processes) {
    if (process.self) continue;
    p.others.push_back(process);
    p.others_bytes += process.used_bytes;
  }
  return p;
}

const char* OomCauseName(OomCause cause) {
  switch (cause) {
    case OomCause::kFragmentation: return "fragmentation";
    case OomCause::kLiveTensors: return "live_tensors";
    case OomCause::kOutsidePytorch: return "outside_pytorch";
    case OomCause::kMemoryCap: return "memory_cap";
    case OomCause::kLargerThanDevice: return "larger_than_device";
  }
  return "live_tensors";
}

OomVerdict JudgeOom(uint64_t request, bool has_free, uint64_t driver_free, uint64_t total, const TorchAtFailure& at,
                    bool expandable_segments) {
  OomVerdict v;
  const TorchFigures& f = at.figures;
  v.request_bytes = request;
  v.has_driver_free = has_free;
  v.driver_free_bytes = has_free ? driver_free : 0;
  v.device_total_bytes = total;
  v.allocated_bytes = f.allocated_bytes;
  v.reserved_bytes = f.reserved_bytes;
  v.reserved_unallocated_bytes = Minus(f.reserved_bytes, f.allocated_bytes);
  v.largest_free_block = f.largest_free_block;
  v.pending_free_bytes = f.pending_free_bytes;
  v.tensors = f.allocations;
  v.outside = at.outside;
  for (const OutsideOwner& o : at.outside) v.outside_traced_bytes += o.bytes;
  v.has_outside_untraced = has_free && total != 0;
  if (v.has_outside_untraced) v.outside_untraced_bytes = Minus(Minus(total, driver_free), at.traced_device_bytes);
  v.expandable_segments = expandable_segments;

  const uint64_t need = Minus(request, v.driver_free_bytes);
  v.shortfall_bytes = Minus(need, v.reserved_unallocated_bytes);
  if (total != 0 && request >= total) {
    v.cause = OomCause::kLargerThanDevice;  // nothing freed could make room
    v.still_short_bytes = request - total;
    return v;
  }
  if (has_free && driver_free >= request) {
    v.cause = OomCause::kMemoryCap;
    v.cause_suffices = true;
    return v;
  }
  const uint64_t outside = v.outside_traced_bytes + v.outside_untraced_bytes;
  struct Part {
    OomCause cause;
    uint64_t bytes;
  };
  // Ties go to the part listed first: what the user's own program holds before what it does not.
  const Part parts[] = {{OomCause::kLiveTensors, v.allocated_bytes},
                        {OomCause::kFragmentation, v.reserved_unallocated_bytes},
                        {OomCause::kOutsidePytorch, outside}};
  const Part* largest = &parts[0];
  const Part* largest_sufficient = nullptr;
  for (const Part& p : parts) {
    if (p.bytes > largest->bytes) largest = &p;
    if (p.bytes >= need && (largest_sufficient == nullptr || p.bytes > largest_sufficient->bytes)) {
      largest_sufficient = &p;
    }
  }
  const Part* named = largest_sufficient != nullptr ? largest_sufficient : largest;
  v.cause = named->cause;
  v.cause_suffices = largest_sufficient != nullptr;
  v.still_short_bytes = Minus(need, named->bytes);
  return v;
}

}  // namespace cumemtrace::analyzer
