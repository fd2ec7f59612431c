// Stack -> group key (see stack_grouper.h). Must never depend on hash-map order: every decision is a walk of one
// stack, innermost first.
#include "analyzer/model/stacks/stack_grouper.h"

#include "absl/strings/str_cat.h"

namespace cumemtrace::analyzer {
namespace {

constexpr auto kRegexFlags = std::regex::ECMAScript | std::regex::optimize;

}  // namespace

std::string GroupingName(const GroupingOptions& options) {
  switch (options.by) {
    case GroupBy::kStack: return "stack";
    case GroupBy::kUser: return "user";
    case GroupBy::kFrame: return absl::StrCat("frame=", options.frame_regex);
    case GroupBy::kPython: return "python";
  }
  return "stack";
}

absl::Status CheckFrameRegex(const std::string& regex) {
  if (regex.empty()) return absl::InvalidArgumentError("--group-by frame= needs a regular expression");
  try {
    std::regex compiled(regex, kRegexFlags);
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("--group-by frame=", regex, ": not a regular expression (",
                                                   e.what(), ")"));
  }
  return absl::OkStatus();
}

StackGrouper::StackGrouper(const StackTable& stacks, const SymbolTable& symbols,
                           const PythonFrameTable& python_frames, std::string executable, GroupingOptions options)
    : stacks_(stacks),
      python_frames_(python_frames),
      executable_(std::move(executable)),
      options_(std::move(options)),
      resolver_(stacks, symbols, python_frames) {
  if (options_.by == GroupBy::kFrame && CheckFrameRegex(options_.frame_regex).ok()) {
    regex_.emplace(options_.frame_regex, kRegexFlags);
  }
}

FrameClass StackGrouper::ClassOf(uint64_t pc) const {
  auto [it, inserted] = class_by_pc_.try_emplace(pc, FrameClass::kLibrary);
  if (inserted) {
    const Frame& f = resolver_.ResolvePc(pc);
    const bool native = f.kind == FrameKind::kNative;
    it->second = ClassifyFrame(f.kind, native ? f.module : f.file, executable_,
                               native && f.function_known ? absl::string_view(f.function) : absl::string_view());
  }
  return it->second;
}

bool StackGrouper::IsAutogradNodeFrame(uint64_t pc) const {
  auto [it, inserted] = node_by_pc_.try_emplace(pc, false);
  if (inserted) {
    const Frame& f = resolver_.ResolvePc(pc);
    it->second = f.function_known && !AutogradNodeName(f.function).empty();
  }
  return it->second;
}

bool StackGrouper::Matches(uint64_t pc) const {
  if (!regex_.has_value()) return false;
  auto [it, inserted] = match_by_pc_.try_emplace(pc, false);
  if (inserted) {
    const Frame& f = resolver_.ResolvePc(pc);
    it->second = (f.function_known && std::regex_search(f.function, *regex_)) ||
                 (!f.file.empty() && std::regex_search(f.file, *regex_));
  }
  return it->second;
}

uint64_t StackGrouper::Canonical(uint64_t pc) const {
  if (!format::IsPythonFramePc(pc)) return pc;
  const PythonFrameInfo* info = python_frames_.Find(format::PythonFrameIdOfPc(pc));
  if (info == nullptr) return pc;
  return python_pc_.try_emplace(std::make_tuple(info->function, info->file, info->line), pc).first->second;
}

const StackKeyInfo& StackGrouper::Describe(uint64_t stack) const {
  auto [it, inserted] = by_stack_.try_emplace(stack);
  StackKeyInfo& info = it->second;
  if (!inserted) return info;
  info.key = GroupKey{GroupKey::Kind::kStack, stack};
  std::optional<uint64_t> node_frame;  // an autograd node's apply: what a backward allocation is grouped by
  for (uint64_t pc : stacks_.Pcs(stack)) {
    const FrameClass c = ClassOf(pc);
    if (!info.outer_frame.has_value() && c != FrameClass::kRuntime && c != FrameClass::kMarker) {
      info.outer_frame = Canonical(pc);
    }
    if (!node_frame.has_value() && !format::IsPythonFramePc(pc) && IsAutogradNodeFrame(pc)) node_frame = pc;
    bool wanted = c == FrameClass::kUser;
    if (options_.by == GroupBy::kFrame) wanted = Matches(pc);
    if (options_.by == GroupBy::kPython) wanted = format::IsPythonFramePc(pc) && c != FrameClass::kMarker;
    if (wanted) {
      info.user_frame = Canonical(pc);
      break;
    }
  }
  if (options_.by == GroupBy::kStack) return info;
  if (info.user_frame.has_value()) {
    info.key = GroupKey{GroupKey::Kind::kFrame, *info.user_frame};
  } else if (node_frame.has_value()) {
    // No user frame on autograd's engine threads: the node (MmBackward0...) says more than the allocator's frame.
    info.outer_frame = node_frame;
    info.key = GroupKey{GroupKey::Kind::kFallback, *node_frame};
  } else if (info.outer_frame.has_value()) {
    info.key = GroupKey{GroupKey::Kind::kFallback, *info.outer_frame};
  }
  return info;
}

}  // namespace cumemtrace::analyzer
