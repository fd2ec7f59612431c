// Training and validation told apart without NVTX ranges, from what a PyTorch trace shows of autograd: a training
// step ends in a backward pass (autograd_passes.h), so the code a training step runs comes back after pass after
// pass, while a validation loop's code (evaluate() -> model(batch), with or without torch.no_grad()) shows up only
// between two passes now and then. That is what "validation needs more than training" needs: where validation ran.
//
// Per allocation of the program's threads (never autograd's engine), its call path (the stack) is "rare" when at
// least kMinPasses backward passes have begun and the call path was used in fewer than 1 / kRareShare of the epochs
// so far (an epoch: the time between two passes beginning). Within one epoch, the rare allocations from the first
// to the last are one candidate; a candidate of at least kMinAllocs rare allocations and at least half the median
// epoch's program allocations (about one forward pass) is a "validate" range, and so is the last one when the trace
// ends in it with a request that ran out of memory after at least kMinFailedAllocs rare requests. "train" is each
// stretch between them in which a backward pass began, from the program's first request after validation (the
// first: from the start of the trace, set-up included) to the next validation. Code that runs before, between or after them without a backward pass
// (set-up, a checkpoint) belongs to the range around it; nothing checks that validation's code never runs in a
// training step too: it only has to be rare.
//
// Known limits, by construction: nothing before kMinPasses passes is called validation (a sanity check run before
// training); validation every fewer than kRareShare steps, or an optimizer step every kRareShare micro-batches or
// more with as many allocations as a forward pass, are not told apart. With NVTX ranges in the trace the program's
// own phases are used instead.
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_STEP_PHASES_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_STEP_PHASES_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analyzer/model/usage/phases.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

inline constexpr const char* kTrainPhase = "train";
inline constexpr const char* kValidatePhase = "validate";

class StepPhaseDetector {
 public:
  static constexpr uint32_t kMinPasses = 8;
  static constexpr uint32_t kRareShare = 16;
  static constexpr uint64_t kMinAllocs = 32;
  // A validation that ran out of memory at the trace's end needs this many rare requests (a forward pass's first
  // layers), so that one odd request that fails is not called validation.
  static constexpr uint64_t kMinFailedAllocs = 8;

  // A tensor request by a thread of the program (not autograd's engine), in replay order, with its epoch (the
  // backward passes begun before it). `request_after_seq`: a phase that begins with this request begins after that
  // sequence number, so that the driver and segment rows the request made before its block come with it. `failed`:
  // the request ran out of memory (a validation that fails at its first batches is validation all the same).
  void OnProgramRequest(uint64_t seq, uint64_t request_after_seq, int64_t time_ns, uint32_t thread, uint64_t stack,
                        uint32_t epoch, bool failed);
  // The ranges found, as the push and pop transitions an NVTX trace would carry, in order; empty when no validation
  // was found. The last range, when training resumed after the last validation, stays open (it ends with the trace).
  // `passes`: backward passes begun in the whole trace; `start_ns`: the trace's start.
  std::vector<PhaseInfo> Finish(uint32_t passes, int64_t start_ns);

 private:
  struct Candidate {
    uint32_t epoch = 0;
    uint32_t thread = 0;
    uint64_t first_after = 0;  // the validation begins after this sequence number
    int64_t first_ns = 0;
    uint64_t last_seq = 0;     // ... and ends with this one (its last rare request)
    int64_t last_ns = 0;
    uint64_t rare = 0;         // rare requests in it
    bool failed = false;       // one of them ran out of memory
    // The program's first request after the last rare one: training resumes there.
    bool has_next = false;
    uint64_t next_after = 0;
    int64_t next_ns = 0;
  };
  struct StackUse {
    uint32_t last_epoch = 0;
    uint32_t epochs = 0;
  };
  void CloseCandidate(bool at_end);

  absl::flat_hash_map<uint64_t, StackUse> uses_;
  std::vector<uint32_t> allocs_per_epoch_;  // the program's requests, by epoch
  bool open_ = false;
  Candidate current_;
  std::vector<Candidate> candidates_;       // with at least kMinAllocs rare requests (or a failed one, at the end)
  static constexpr size_t kMaxCandidates = 100000;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_STEP_PHASES_H_
