// "What if": a trace's PyTorch requests replayed through the caching allocator (allocator_replay.h) under the
// recorded settings and under others, on the same card or another.
//
// Three replays of one device, from one read of the trace:
//  1. Fidelity: under the recorded settings, the driver answering as the recorded one did. Every segment the replay
//     asks for or releases must be the recorded allocator's (same size, same order), every block must land at the
//     recorded address, and the OOM must come at the same request. The first difference ends it, and is reported:
//     nothing that depends on the replay is claimed past it.
//  2. Capacity check: under the recorded settings again, the driver a capacity model (the card's memory, less what
//     was outside PyTorch at each moment: other processes, this process's other memory, the CUDA context, as the
//     driver's free/total samples and the failed allocations' own figures show). It must fail where the recorded
//     run failed, or the model is not trusted for what-ifs.
//  3. What if: the capacity model with the settings, capacity and outside memory asked for.
// Cache the recorded allocator released with no refusal by the driver before it is torch.cuda.empty_cache(), which
// every replay repeats at that point, unless the release's stack (trace format 5) names a request as its caller:
// then it was the request's own doing (a per-process cap refused new memory, or garbage collection), which each
// replay makes, or not, by its own rules.
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_WHATIF_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_WHATIF_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cumemtrace::analyzer {

struct WhatIfOptions {
  std::vector<std::string> settings;      // "KEY:VALUE", applied over the recorded PYTORCH_CUDA_ALLOC_CONF
  std::optional<uint64_t> capacity;       // another card's memory, in bytes
  bool without_outside = false;           // nothing outside PyTorch on the device
};

// The outcome of one replay.
struct ReplayOutcome {
  bool ran = false;              // false: not replayed (unsupported settings, no capacity known...)
  bool oom = false;              // a request failed
  uint64_t requests = 0;         // requests served before the end or the failure
  uint64_t reserved_peak = 0;
  uint64_t allocated_peak = 0;
  uint64_t recovered = 0;        // requests that needed cache released and a retry
  // The failing request, when oom.
  uint64_t failed_seq = 0;
  uint64_t failed_size = 0;
  uint64_t failed_stack = 0;
  uint64_t reserved_at_failure = 0;
  uint64_t allocated_at_failure = 0;
  uint64_t largest_free_at_failure = 0;
  uint64_t outside_at_failure = 0;
  // With a capacity model: the least room left between the card and reserved + outside, over the run.
  uint64_t headroom = 0;
};

struct FidelityCheck {
  bool exact = false;
  uint64_t requests = 0;         // replayed before the end or the divergence
  uint64_t segments = 0;         // segment allocations and releases matched
  uint64_t blocks = 0;           // blocks placed at the recorded address
  uint64_t diverged_seq = 0;     // when !exact
  std::string divergence;        // what differed, one sentence
  // Requests the recorded allocator refused without asking the driver: a per-process cap
  // (torch.cuda.set_per_process_memory_fraction). The cap is not in the trace; what the run shows bounds it:
  // cap_low <= cap <= cap_high.
  uint64_t capped_refusals = 0;
  uint64_t cap_low = 0;
  uint64_t cap_high = 0;
};

struct WhatIf {
  int32_t device = 0;
  std::string recorded_settings;   // PYTORCH_CUDA_ALLOC_CONF as recorded ("" = defaults)
  std::string settings;            // those of the what-if replay
  std::string unsupported;         // settings the replay does not restate ("" = none); then nothing is replayed
  uint64_t capacity = 0;           // the card's memory in the what-if replay (0 = unknown)
  uint64_t recorded_capacity = 0;  // the recorded card's, from the driver's figures (0 = unknown)
  uint64_t outside_max = 0;        // the most memory seen outside PyTorch on the device
  bool without_outside = false;
  uint64_t torch_requests = 0;
  // The recorded run, as its allocator events say.
  bool recorded_oom = false;
  uint64_t recorded_oom_seq = 0;
  uint64_t recorded_reserved_peak = 0;
  FidelityCheck fidelity;
  ReplayOutcome capacity_check;   // recorded settings, capacity model
  bool capacity_model_agrees = false;  // capacity_check failed where (and only where) the recorded run did
  ReplayOutcome whatif;
  // Under a cap: the what-if replayed with the cap at each of its bounds; the answer holds only when both agree.
  bool cap_bounds_agree = true;
  uint64_t whatif_cap = 0;          // the per-process cap in the what-if replay (its lower bound when inferred)
  std::vector<std::string> notes;   // what the replay assumed, one sentence each

};

// The requests and recorded allocator decisions of one device (that of the first OOM, else of the first request),
// read once to be replayed under several options. Memory: about 56 bytes per allocator event of that device.
struct ReplayInput;
struct ReplayInputDeleter {
  void operator()(ReplayInput* input) const;
};
using ReplayInputPtr = std::unique_ptr<ReplayInput, ReplayInputDeleter>;

// Errors are the reader's, a trace without PyTorch's allocator events (InvalidArgument, one line), or one with more
// than `max_events` of them (ResourceExhausted: the memory a replay holds grows with them).
absl::StatusOr<ReplayInputPtr> ReadReplayInput(const std::string& path, size_t max_events = SIZE_MAX);
// Why a replay of `steps` allocator events is not made by the way (more than `max_events`).
std::string ReplayTooLong(uint64_t steps, size_t max_events);
WhatIf ReplayWhatIf(const ReplayInput& input, const WhatIfOptions& options);

// Reads `path` and replays its requests once.
absl::StatusOr<WhatIf> ReplayWhatIf(const std::string& path, const WhatIfOptions& options);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_WHATIF_H_
