#include "analyzer/reports/autograd_report.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "analyzer/model/stacks/frame_class.h"

namespace cumemtrace::analyzer {
namespace {

// Frames enough to reach the user's code above PyTorch's modules, and the autograd node above the allocator.
constexpr size_t kMaxFrames = 256;

// The user's Python frames of a stack, outermost first.
std::vector<Frame> UserFrames(uint64_t stack, const std::string& executable, FrameResolver& resolver) {
  std::vector<Frame> user;
  for (const Frame& f : resolver.ResolveStack(stack, kMaxFrames)) {
    if (f.kind != FrameKind::kPython) continue;
    if (ClassifyFrame(f.kind, f.file, executable) == FrameClass::kUser) user.push_back(f);
  }
  std::reverse(user.begin(), user.end());
  return user;
}

bool SameLine(const Frame& a, const Frame& b) {
  return a.file == b.file && a.line == b.line && a.function == b.function;
}

// The user's frames of a stack as one key: its call path through the user's code. Training's forward and an
// evaluation's differ there (train() and evaluate() call the model), while a new kernel or backend inside the
// same forward does not change it.
std::string UserPathKey(uint64_t stack, const std::string& executable, FrameResolver& resolver) {
  std::string key;
  for (const Frame& f : UserFrames(stack, executable, resolver)) {
    absl::StrAppend(&key, f.file, ":", f.line, ":", f.function, "\n");
  }
  return key;
}

// The innermost user line every stack passes through (their common outermost user frames' last), over the stacks
// holding most of the bytes.
std::optional<Frame> CommonUserLine(const std::vector<RetentionStack>& stacks, uint64_t total,
                                    const std::string& executable, FrameResolver& resolver) {
  std::vector<Frame> common;
  bool first = true;
  uint64_t covered = 0;
  for (const RetentionStack& s : stacks) {
    if (!first && covered >= total - total / 10) break;  // 90% of the bytes decide
    std::vector<Frame> user = UserFrames(s.stack, executable, resolver);
    if (user.empty()) continue;
    covered += s.bytes;
    if (first) {
      common = std::move(user);
      first = false;
      continue;
    }
    size_t n = 0;
    while (n < common.size() && n < user.size() && SameLine(common[n], user[n])) ++n;
    common.resize(n);
  }
  if (common.empty()) return std::nullopt;
  return common.back();
}

// Made inside a library (an nn.Module's forward, a model's code in an installed package): the stack's innermost
// Python frame is not the user's. A graph that is kept keeps the tensors its modules saved; a tensor made right at
// the user's line and kept is kept by a reference, which torch.no_grad() would not drop.
bool MadeInsideALibrary(uint64_t stack, const std::string& executable, FrameResolver& resolver) {
  for (const Frame& f : resolver.ResolveStack(stack, kMaxFrames)) {
    if (f.kind != FrameKind::kPython) continue;
    return ClassifyFrame(f.kind, f.file, executable) != FrameClass::kUser;
  }
  return false;
}

std::optional<Frame> InnermostUserLine(uint64_t stack, const std::string& executable, FrameResolver& resolver) {
  std::vector<Frame> user = UserFrames(stack, executable, resolver);
  if (user.empty()) return std::nullopt;
  return user.back();
}

}  // namespace

const char* GraphFixName(GraphFix fix) {
  switch (fix) {
    case GraphFix::kNoGrad: return "no_grad";
    case GraphFix::kItem: return "item";
    case GraphFix::kNone: break;
  }
  return "none";
}

std::string AutogradNodeOf(const std::vector<Frame>& frames) {
  for (const Frame& f : frames) {
    if (f.kind != FrameKind::kNative) continue;
    std::string node = AutogradNodeName(f.function);
    if (!node.empty()) return node;
  }
  return "";
}

AutogradView BuildAutogradView(const GraphRetention& r, const std::string& executable, FrameResolver& resolver) {
  AutogradView v;
  v.grad_known = r.grad_known;
  v.live_bytes = r.live_bytes;
  v.recording_bytes = r.recording_bytes;
  // Who in the backward pass holds the engine's tensors.
  absl::flat_hash_map<std::string, BackwardNode> nodes;
  for (const RetentionStack& s : r.backward) {
    std::string node = AutogradNodeOf(resolver.ResolveStack(s.stack, kMaxFrames));
    BackwardNode& n = nodes[node];
    n.node = node;
    n.bytes += s.bytes;
    n.count += s.count;
    v.backward.bytes += s.bytes;
    v.backward.count += s.count;
    if (!node.empty()) v.backward.named_bytes += s.bytes;
  }
  for (auto& [name, n] : nodes) v.backward.nodes.push_back(std::move(n));
  std::sort(v.backward.nodes.begin(), v.backward.nodes.end(), [](const BackwardNode& a, const BackwardNode& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.node < b.node;
  });
  if (!r.grad_known) return v;
  // Of the unfollowed tensors, those a graph keeps: made inside the model's modules. Only after a backward pass
  // ran is "no backward pass followed" a fact about this code: before any, a training script's first forward
  // looks the same.
  std::vector<RetentionStack> graph;
  uint64_t graph_bytes = 0, graph_count = 0;
  if (r.backward_passes > 0 && !r.unfollowed.empty()) {
    // "No backward pass followed" holds for a call path of the user's code, not for one stack: a training step that
    // runs a new kernel makes new stacks under a path every earlier step's backward followed.
    absl::flat_hash_map<std::string, uint32_t> first_epoch_of_path;
    for (const auto& [stack, epoch] : r.first_recording_epochs) {
      auto [it, added] = first_epoch_of_path.try_emplace(UserPathKey(stack, executable, resolver), epoch);
      if (!added) it->second = std::min(it->second, epoch);
    }
    for (const RetentionStack& s : r.unfollowed) {
      if (!MadeInsideALibrary(s.stack, executable, resolver)) continue;
      auto path = first_epoch_of_path.find(UserPathKey(s.stack, executable, resolver));
      if (path != first_epoch_of_path.end() && path->second < r.backward_passes) continue;  // followed before
      graph.push_back(s);
      graph_bytes += s.bytes;
      graph_count += s.count;
    }
  }
  // A fix is named only for a real part of the moment.
  // The kept tensors by the user's line that made them; the largest line is the one named.
  struct Line {
    uint64_t bytes = 0, count = 0;
    uint32_t first_epoch = UINT32_MAX, last_epoch = 0;
    std::optional<Frame> where;
  };
  Line kept;
  {
    absl::flat_hash_map<std::string, Line> lines;
    for (const RetentionStack& s : r.kept) {
      std::optional<Frame> where = InnermostUserLine(s.stack, executable, resolver);
      const std::string key = where.has_value() ? absl::StrCat(where->file, ":", where->line) : "";
      Line& l = lines[key];
      l.bytes += s.bytes;
      l.count += s.count;
      l.first_epoch = std::min(l.first_epoch, s.first_epoch);
      l.last_epoch = std::max(l.last_epoch, s.last_epoch);
      l.where = where;
    }
    for (auto& [key, l] : lines) {
      if (l.bytes > kept.bytes) kept = l;
    }
  }
  const uint64_t worth = std::max<uint64_t>(r.live_bytes / 10, 1);
  const bool no_grad = graph_bytes >= worth;
  const bool item = kept.bytes >= worth;
  if (no_grad && (!item || graph_bytes >= kept.bytes)) {
    v.finding.fix = GraphFix::kNoGrad;
    v.finding.bytes = graph_bytes;
    v.finding.count = graph_count;
    v.finding.where = CommonUserLine(graph, graph_bytes, executable, resolver);
  } else if (item) {
    v.finding.fix = GraphFix::kItem;
    v.finding.bytes = kept.bytes;
    v.finding.count = kept.count;
    v.finding.steps = kept.last_epoch - kept.first_epoch + 1;
    v.finding.where = kept.where;
  }
  v.finding.backward_passes = r.backward_passes;
  return v;
}

}  // namespace cumemtrace::analyzer
