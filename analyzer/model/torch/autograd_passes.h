// Autograd as the allocations show it, for the question "what keeps these tensors alive?". Two facts per PyTorch
// block: whether autograd was recording on the thread that asked for it (the trace's TORCH_ALLOC_GRAD /
// TORCH_ALLOC_NO_GRAD), and whether it was asked for by autograd's engine (a thread PyTorch names pt_autograd_N,
// which runs every backward pass of CUDA tensors). From them, backward passes: a pass begins with the engine's first
// allocation after the program's own threads allocated, and every block is stamped with the number of passes begun
// before it (its epoch).
//
// At a moment of interest (an OOM, the allocated peak) JudgeRetention looks at the live tensors for the two ways a
// program commonly keeps autograd's graph, and with it every tensor the graph saved, alive:
//   unfollowed  allocated while recording, after the last backward pass, by code (a stack) that no backward pass
//               ever followed: an evaluation loop without torch.no_grad(). With no backward pass at all before the
//               moment, the same tensors are reported as such (a training script's first forward looks alike).
//   kept        allocated while recording, outliving backward passes, at stacks whose live tensors come from at
//               least three different epochs: something keeps them from step to step (a running total of a tensor,
//               which keeps each step's graph too; a list of results).
// A pass begins with the engine's first allocation after the program's threads allocated, and ends when the thread
// that allocated last before it allocates again (another thread of the program allocating meanwhile, a data
// prefetcher, does not split a pass).
// Traces whose blocks carry no grad mode get neither (never a guess).
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_AUTOGRAD_PASSES_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_AUTOGRAD_PASSES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "proto/format.h"

namespace cumemtrace::analyzer {

// True for the threads PyTorch's autograd engine runs backward passes on ("pt_autograd_0", ...).
bool IsAutogradEngineThread(absl::string_view thread_name);

// What a block allocation says of autograd.
struct AutogradStamp {
  format::GradMode grad = format::GradMode::kUnknown;
  bool backward = false;  // allocated by autograd's engine
  uint32_t epoch = 0;     // backward passes begun before it
};

// A live tensor as the judgement needs it.
struct AutogradTensor {
  uint64_t stack = 0;
  uint64_t size = 0;
  AutogradStamp stamp;
};

struct RetentionStack {
  uint64_t stack = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  uint32_t first_epoch = 0;  // of its live tensors
  uint32_t last_epoch = 0;
  uint32_t epochs = 0;       // distinct epochs among its live tensors
};

struct GraphRetention {
  bool grad_known = false;        // the blocks carry autograd's grad mode
  uint32_t backward_passes = 0;   // begun before the moment
  uint64_t live_bytes = 0;        // every live tensor (extents)
  uint64_t recording_bytes = 0;   // of them, allocated while autograd recorded, outside its engine
  uint64_t backward_bytes = 0;    // of them, allocated by autograd's engine
  uint64_t unfollowed_bytes = 0, unfollowed_count = 0;
  std::vector<RetentionStack> unfollowed;  // largest first, at most kMaxStacks
  uint64_t kept_bytes = 0, kept_count = 0;
  std::vector<RetentionStack> kept;        // largest first, at most kMaxStacks
  std::vector<RetentionStack> backward;    // every stack of the engine's live tensors, largest first
  // Every stack that allocated while recording (outside the engine), with the epoch of its first such allocation:
  // the report decides "followed by a backward pass" per call path of the user's code, which several stacks share.
  std::vector<std::pair<uint64_t, uint32_t>> first_recording_epochs;
  static constexpr size_t kMaxStacks = 64;
};

class AutogradPasses {
 public:
  // A block handed out by `thread` (ThreadInfo::index), in replay order; returns its stamp.
  AutogradStamp OnBlockAlloc(format::Api api, bool engine_thread, uint32_t thread, uint64_t stack);
  uint32_t passes() const { return passes_; }
  // Whether any block carried a grad mode.
  bool grad_known() const { return grad_known_; }

  // The judgement over the tensors live at a moment (see the file comment), when `passes_then` passes had begun.
  // "Never followed by a backward pass" looks at every pass counted so far, so a moment judged at the end of the
  // trace (a peak) knows whether its code was followed by one later.
  GraphRetention JudgeRetention(const std::vector<AutogradTensor>& live, uint32_t passes_then) const;

 private:
  uint32_t passes_ = 0;
  bool in_backward_ = false;
  uint32_t last_program_thread_ = 0;  // the program's (non-engine) thread that allocated last
  uint32_t pass_driver_ = 0;          // ... when the current pass began
  bool grad_known_ = false;
  // Per stack, the epoch of its first allocation while recording: a stack allocated first in the current epoch
  // was never followed by a backward pass.
  absl::flat_hash_map<uint64_t, uint32_t> first_recording_epoch_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_AUTOGRAD_PASSES_H_
