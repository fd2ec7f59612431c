// Pieces every report shares: options, stack groups with their frames resolved, and the overview of the trace
// (process, devices, threads, the tool's health). Reports read only the model; renderers read only reports.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_REPORT_COMMON_H_
#define CUMEMTRACE_ANALYZER_REPORTS_REPORT_COMMON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/model/analysis.h"
#include "analyzer/model/stacks/frame_resolver.h"

namespace cumemtrace::analyzer {

struct ReportOptions {
  size_t top = 10;     // stack groups / entries per list
  size_t frames = 8;   // frames per stack, innermost first
};

// What a group (or one stack) is keyed by, resolved: see stack_grouper.h.
struct GroupLabel {
  GroupKey::Kind kind = GroupKey::Kind::kStack;
  uint64_t stacks = 1;               // distinct stacks merged
  std::optional<Frame> user_frame;   // the innermost user (or matching) frame; none: the stack has none
  std::optional<Frame> group_frame;  // the frame the group is keyed by (kFrame, kFallback); none for kStack
};

// A stack as a PyTorch user reads it: the Python frames first (the user's own, innermost first, then the
// libraries'), and the native frames (the C++ dispatcher, the allocator, the CUDA runtime) folded into one line.
// Only for stacks with Python frames; text renders it, JSON keeps the stack as recorded.
struct StackView {
  bool python = false;              // the stack has Python frames: render this view
  std::vector<Frame> python_frames;  // user frames then library frames, each innermost first; at most `frames`
  uint64_t more_python = 0;         // Python frames not listed
  uint64_t native_frames = 0;       // native frames folded
  std::string native_first;         // the innermost named native frame outside the runtime ("" if none)
  std::string native_last;          // the outermost named native frame between it and the first Python frame
};

// The view of stack `stack` (empty when it has no Python frames, or `grouper` is null).
StackView MakeStackView(uint64_t stack, const ReportOptions& options, FrameResolver& resolver,
                        const StackGrouper* grouper);

struct ResolvedGroup {
  uint64_t stack_id = 0;  // the group's largest stack
  uint64_t bytes = 0;
  uint64_t count = 0;
  double share = 0;  // bytes / the total the group is part of (0 when that total is 0)
  std::vector<Frame> frames;  // of stack_id
  GroupLabel label;
  StackView view;  // of stack_id
};

// What the trace says about itself and about the tool that wrote it.
struct Overview {
  const TraceInfo* info = nullptr;
  ModelStats model;
  std::string group_by = "stack";  // GroupingName of the grouping the reports used
  bool allocator_layer = false;    // the trace has PyTorch's caching-allocator layer
  const PhaseResults* phases = nullptr;  // for the --phase / --window line (null: none)
};

// The label of a group keyed by `key` whose largest stack is `stack` (`grouper` null: a plain stack).
GroupLabel LabelGroup(const GroupKey& key, uint64_t stack, uint64_t stacks, const StackGrouper* grouper,
                      FrameResolver& resolver);

// Groups [0, top) of `groups`, each with up to `frames` frames; share against `total_bytes`.
std::vector<ResolvedGroup> ResolveGroups(const std::vector<StackGroup>& groups, uint64_t total_bytes,
                                         const ReportOptions& options, FrameResolver& resolver,
                                         const StackGrouper* grouper = nullptr);

double Share(uint64_t part, uint64_t whole);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_REPORT_COMMON_H_
