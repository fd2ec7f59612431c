// Shared report helpers: resolving stack groups into frames.
#include "analyzer/reports/report_common.h"

#include <algorithm>

namespace cumemtrace::analyzer {

double Share(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

GroupLabel LabelGroup(const GroupKey& key, uint64_t stack, uint64_t stacks, const StackGrouper* grouper,
                      FrameResolver& resolver) {
  GroupLabel label;
  label.kind = key.kind;
  label.stacks = stacks;
  if (key.kind != GroupKey::Kind::kStack) label.group_frame = resolver.ResolvePc(key.value);
  if (key.kind == GroupKey::Kind::kFrame) {
    label.user_frame = label.group_frame;
  } else if (key.kind == GroupKey::Kind::kStack && grouper != nullptr) {
    if (const std::optional<uint64_t>& pc = grouper->Describe(stack).user_frame; pc.has_value()) {
      label.user_frame = resolver.ResolvePc(*pc);
    }
  }
  return label;
}

StackView MakeStackView(uint64_t stack, const ReportOptions& options, FrameResolver& resolver,
                        const StackGrouper* grouper) {
  StackView v;
  if (grouper == nullptr) return v;
  constexpr size_t kAllFrames = 4096;
  const std::vector<Frame> frames = resolver.ResolveStack(stack, kAllFrames);
  std::vector<const Frame*> user, library;
  bool seen_python = false;
  for (const Frame& f : frames) {
    if (f.kind == FrameKind::kPython) {
      seen_python = true;
      (grouper->ClassOf(f.pc) == FrameClass::kUser ? user : library).push_back(&f);
      continue;
    }
    if (f.kind != FrameKind::kNative) continue;
    ++v.native_frames;
    // Name the native run below the Python frames: the innermost frame outside the runtime, the outermost before
    // the first Python frame.
    if (seen_python || !f.function_known) continue;
    const FrameClass c = grouper->ClassOf(f.pc);
    if (c == FrameClass::kRuntime) continue;
    if (v.native_first.empty()) v.native_first = f.function;
    v.native_last = f.function;
  }
  if (!seen_python) return StackView{};
  v.python = true;
  for (const std::vector<const Frame*>* list : {&user, &library}) {
    for (const Frame* f : *list) {
      if (v.python_frames.size() < options.frames) {
        v.python_frames.push_back(*f);
      } else {
        ++v.more_python;
      }
    }
  }
  return v;
}

std::vector<ResolvedGroup> ResolveGroups(const std::vector<StackGroup>& groups, uint64_t total_bytes,
                                         const ReportOptions& options, FrameResolver& resolver,
                                         const StackGrouper* grouper) {
  std::vector<ResolvedGroup> out;
  const size_t n = std::min(groups.size(), options.top);
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    ResolvedGroup g;
    g.stack_id = groups[i].stack;
    g.bytes = groups[i].bytes;
    g.count = groups[i].count;
    g.share = Share(g.bytes, total_bytes);
    g.frames = resolver.ResolveStack(g.stack_id, options.frames);
    g.label = LabelGroup(groups[i].key, groups[i].stack, groups[i].stacks, grouper, resolver);
    g.view = MakeStackView(g.stack_id, options, resolver, grouper);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace cumemtrace::analyzer
