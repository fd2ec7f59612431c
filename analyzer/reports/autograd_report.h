// What autograd kept alive, as a person acts on it: the change to make and the line to make it at, from the
// model's judgement of the live tensors (model/torch/autograd_passes.h), and who in the backward pass holds the
// engine's tensors (the autograd node in each one's native stack: MmBackward0, AccumulateGrad, ...).
//
// The fix is named only when its tensors are a real part of the moment (at least a tenth of the live bytes):
//   no_grad  after a backward pass ran, code that recorded and that no backward pass followed (judged per call
//            path through the user's code: all the user's frames of a stack), its tensors made inside the model's
//            modules (what a kept graph holds; a tensor made at the user's own line and kept is
//            kept by a reference, which no_grad would not drop): wrap the innermost line of the user's that all
//            those tensors share (the call in the evaluation loop) in `with torch.no_grad():`.
//   item     tensors of one line outliving backward passes step after step (from three epochs or more): keep a
//            Python number (`.item()`) or a CPU copy of what that line computes, not the GPU tensor.
// The larger of the two wins when both are there. Tests and the GPU checks (tests/gpu/graph_retention_check.sh)
// rerun the program with the named change and show the OOM gone.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_AUTOGRAD_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_AUTOGRAD_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/model/analysis.h"
#include "analyzer/model/stacks/frame_resolver.h"
#include "analyzer/model/torch/autograd_passes.h"

namespace cumemtrace::analyzer {

enum class GraphFix : uint8_t { kNone, kNoGrad, kItem };
// "none", "no_grad", "item".
const char* GraphFixName(GraphFix fix);

struct GraphFinding {
  GraphFix fix = GraphFix::kNone;
  uint64_t bytes = 0;             // the live tensors it is about
  uint64_t count = 0;
  uint32_t backward_passes = 0;   // begun before the moment
  uint32_t steps = 0;             // item: the backward passes the named line's tensors span
  std::optional<Frame> where;     // the user's line to change; none when no user frame was found
};

struct BackwardNode {
  std::string node;   // "MmBackward0", "AccumulateGrad", ...; "" for tensors whose stack names no node
  uint64_t bytes = 0;
  uint64_t count = 0;
};

// The live tensors autograd's engine allocated, by the autograd node that asked.
struct BackwardAttribution {
  uint64_t bytes = 0;
  uint64_t count = 0;
  uint64_t named_bytes = 0;         // with a node in their stack
  std::vector<BackwardNode> nodes;  // largest first, the unnamed ones too
};

struct AutogradView {
  bool grad_known = false;   // the trace's blocks carry autograd's grad mode
  uint64_t live_bytes = 0;
  uint64_t recording_bytes = 0;  // allocated while autograd recorded (outside its engine)
  GraphFinding finding;
  BackwardAttribution backward;
};

// The autograd node that made an allocation, from its native frames (innermost first): the innermost
// torch::autograd::...::apply frame's class, or "" when there is none.
std::string AutogradNodeOf(const std::vector<Frame>& frames);

AutogradView BuildAutogradView(const GraphRetention& retention, const std::string& executable,
                               FrameResolver& resolver);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_AUTOGRAD_REPORT_H_
