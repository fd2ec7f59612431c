// `--group-by`: which stacks a report merges into one group. People ask "which line of mine holds the memory",
// and a training step reaches cudaMalloc through many stacks (autograd threads, the caching allocator's retry
// paths, different layers) that differ only below that line. So by default stacks are grouped by their innermost
// user frame (frame_class.h); `stack` keeps one group per stack (what scripts resolving stack ids need); `frame=RE`
// groups by the innermost frame whose function or file matches RE; `python` by the innermost Python frame, in or out
// of site-packages (a Trainer.train() run splits into attention, MLP, optimizer, ...). A stack without such a frame is grouped by its
// innermost frame outside the runtime (CUDA driver and runtime, libc, cumemtrace), and says so (no user frame);
// a stack entirely inside the runtime, or no stack, stays a group of its own.
//
// Decisions are cached per stack id and per pc, so the cost grows with unique stacks, never with events. The cache
// is filled lazily and is not thread-safe: one grouper per analysis, used from one thread.
#ifndef CUMEMTRACE_ANALYZER_MODEL_STACKS_STACK_GROUPER_H_
#define CUMEMTRACE_ANALYZER_MODEL_STACKS_STACK_GROUPER_H_

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "analyzer/model/stacks/frame_resolver.h"

namespace cumemtrace::analyzer {

enum class GroupBy : uint8_t { kStack, kUser, kFrame, kPython };

struct GroupingOptions {
  GroupBy by = GroupBy::kStack;
  std::string frame_regex;  // GroupBy::kFrame only (ECMAScript syntax, searched anywhere in the name or file)
};

// "stack", "user", "frame=RE", "python".
std::string GroupingName(const GroupingOptions& options);
// OK, or InvalidArgument saying why `regex` is not a regular expression.
absl::Status CheckFrameRegex(const std::string& regex);

// What a group is keyed by: a stack id, or a frame (a pc; Python frames with the same function, file and line
// share one pc).
struct GroupKey {
  enum class Kind : uint8_t {
    kStack,     // value = stack id (GroupBy::kStack, or a stack with no frame outside the runtime)
    kFrame,     // value = pc of the user frame (kUser), the matching frame (kFrame) or the Python frame (kPython)
    kFallback,  // value = pc of the innermost frame outside the runtime: the stack has no user/matching frame
  };
  Kind kind = Kind::kStack;
  uint64_t value = 0;
  bool operator==(const GroupKey& o) const { return kind == o.kind && value == o.value; }
  bool operator<(const GroupKey& o) const { return std::tie(kind, value) < std::tie(o.kind, o.value); }
  template <typename H>
  friend H AbslHashValue(H h, const GroupKey& k) {
    return H::combine(std::move(h), k.kind, k.value);
  }
};

struct StackKeyInfo {
  GroupKey key;
  // The frame a report shows as the group's user frame: the innermost user frame (user, stack), the innermost
  // matching frame (frame=RE) or the innermost Python frame (python); none when the stack has no such frame.
  std::optional<uint64_t> user_frame;
  // The innermost frame outside the runtime and the marker (none when the stack has only runtime frames).
  std::optional<uint64_t> outer_frame;
};

class StackGrouper {
 public:
  // `executable`: TraceHeader::executable. The tables must outlive the grouper; options.frame_regex must pass
  // CheckFrameRegex (an invalid one matches nothing).
  StackGrouper(const StackTable& stacks, const SymbolTable& symbols, const PythonFrameTable& python_frames,
               std::string executable, GroupingOptions options);

  const GroupingOptions& options() const { return options_; }
  // Cached per stack id.
  const StackKeyInfo& Describe(uint64_t stack) const;
  GroupKey KeyOf(uint64_t stack) const { return Describe(stack).key; }
  // The class of the frame at `pc` (cached).
  FrameClass ClassOf(uint64_t pc) const;

 private:
  bool Matches(uint64_t pc) const;
  bool IsAutogradNodeFrame(uint64_t pc) const;
  uint64_t Canonical(uint64_t pc) const;

  const StackTable& stacks_;
  const PythonFrameTable& python_frames_;
  const std::string executable_;
  const GroupingOptions options_;
  std::optional<std::regex> regex_;
  mutable FrameResolver resolver_;
  mutable absl::flat_hash_map<uint64_t, StackKeyInfo> by_stack_;
  mutable absl::flat_hash_map<uint64_t, FrameClass> class_by_pc_;
  mutable absl::flat_hash_map<uint64_t, bool> match_by_pc_;
  mutable absl::flat_hash_map<uint64_t, bool> node_by_pc_;
  // (function, file, line) string ids of a Python frame -> the first pc seen with them.
  mutable absl::flat_hash_map<std::tuple<uint32_t, uint32_t, uint32_t>, uint64_t> python_pc_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_STACKS_STACK_GROUPER_H_
