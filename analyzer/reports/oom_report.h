// The OOM report: every failed allocation kept by the model, with the request (size, api, device, kind), the
// driver's answer (error, free/total memory then), the traced live memory at that moment in the same place
// (the device's memory, or host memory for pinned/registered requests) grouped by stack, and who asked (thread,
// stack).
#ifndef CUMEMTRACE_ANALYZER_REPORTS_OOM_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_OOM_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/torch/allocator_whatif.h"
#include "analyzer/reports/autograd_report.h"
#include "analyzer/reports/oom_verdict.h"
#include "analyzer/reports/report_common.h"
#include "analyzer/reports/torch_report.h"

namespace cumemtrace::analyzer {

struct OomEntry {
  uint64_t seq = 0;
  int64_t time_ns = 0;  // relative
  int32_t device = 0;
  const char* kind = "";
  const char* api = "";
  uint64_t requested_bytes = 0;
  int32_t error_code = 0;
  bool out_of_memory = false;  // error_code is kCudaErrorOutOfMemory
  std::string error;  // CUDA_ERROR_OUT_OF_MEMORY, or "error <code>"
  bool has_mem_info = false;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  bool live_is_host = false;  // live_* count host memory (pinned + registered), else the device's memory
  uint64_t live_bytes = 0;
  uint64_t live_count = 0;
  uint32_t thread = 0;
  std::string thread_name;
  uint64_t stack_id = 0;
  std::vector<Frame> stack;
  StackView view;
  GroupLabel request;  // the request's own stack: its user frame, and the group it would join
  bool snapshot_taken = false;
  std::vector<ResolvedGroup> live_by_stack;  // by group (see --group-by)
  uint64_t group_count = 0;  // groups live then in all
  uint64_t other_bytes = 0;  // live in stacks not listed
  uint64_t other_count = 0;
  std::string phase;  // the phase running on the failing thread (or anywhere), "" for none
  // PyTorch's caching allocator asked (the trace has its layer): its state then, and the verdict.
  bool has_verdict = false;
  OomVerdict verdict;
  // PyTorch's allocator released cache, asked again and served the request: not a failure the program saw.
  bool recovered = false;
  OtherProcesses processes;  // on the device (device memory requests only)
};

// A TORCH_OOM: PyTorch's caching allocator gave up (after releasing what cache it could).
struct TorchOomEntry {
  uint64_t seq = 0;
  int64_t time_ns = 0;  // relative
  int32_t device = 0;
  uint64_t stream = 0;
  uint64_t thread = 0;
  std::string thread_name;
  OomVerdict verdict;  // request = the rounded size the allocator looked for
  std::vector<ResolvedGroup> tensors;  // live tensors (extents) by group (see --group-by)
  uint64_t tensor_groups = 0;
  uint64_t tensor_other_bytes = 0;
  uint64_t tensor_other_count = 0;
  std::vector<ResolvedGroup> tensors_by_python;  // ... by innermost Python frame
  uint64_t python_groups = 0;
  uint64_t python_other_bytes = 0;
  uint64_t python_other_count = 0;
  AutogradView autograd;  // what kept the live tensors, and the backward pass's holders
};

// A setting tried on the allocator replay (model/torch/allocator_whatif.h) for a PyTorch OOM: the only source of
// advice. Listed only when the replay reproduced the recorded run.
struct ReplayCheck {
  std::string setting;           // "max_split_size_mb:512", or "" for "without the memory outside PyTorch"
  bool without_outside = false;
  bool oom = true;
  uint64_t reserved_peak = 0;    // when it runs through
};

struct OomReport {
  std::vector<OomEntry> ooms;  // in replay order
  uint64_t total = 0;          // failed allocations in the trace (ooms may hold fewer: see AnalyzeOptions)
  uint64_t recovered = 0;      // of those kept in `ooms`, the ones PyTorch's allocator recovered from
  // The last entry of `ooms` that was not recovered from, or nullptr.
  const OomEntry* LastFailure() const {
    for (auto it = ooms.rbegin(); it != ooms.rend(); ++it) {
      if (!it->recovered) return &*it;
    }
    return nullptr;
  }
  TorchLayerSummary torch_layer;
  std::vector<TorchOomEntry> torch_ooms;  // in replay order
  uint64_t torch_total = 0;
  // The replay's answers for the last PyTorch OOM; when the replay could not reproduce the run, why not (one
  // sentence) and no checks.
  bool replayed = false;
  uint64_t replay_steps = 0;  // the allocator events a replay would take (AllocatorResult::replay_steps)
  std::string replay_unchecked;
  std::vector<ReplayCheck> replay_checks;
  // The recorded run hit a per-process memory cap: the answers keep it as recorded (between these bounds), which
  // a program that sets its cap from its own usage would not.
  bool replay_under_cap = false;
  uint64_t cap_low = 0, cap_high = 0;
};

// Settings worth trying on `recorded` (the replay's own outcome under the recorded settings comes first), as
// what-if options; an empty `settings` with without_outside set means "nothing outside PyTorch".
std::vector<WhatIfOptions> OomReplayCandidates(const WhatIf& recorded);
// Adds the replays' answers (recorded first, then one per candidate) to the report.
void AddReplayChecks(const std::vector<WhatIf>& replays, OomReport* report);

OomReport BuildOomReport(const Analysis& analysis, const ReportOptions& options, FrameResolver& resolver);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_OOM_REPORT_H_
