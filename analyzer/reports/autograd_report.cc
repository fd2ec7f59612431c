#include "analyzer/reports/autograd_report.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
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
  if (r.backward_passes > 0) {
    for (const RetentionStack& s : r.unfollowed) {
      if (!MadeInsideALibrary(s.stack, executable, resolver)) continue;
      graph.push_back(s);
      graph_bytes += s.bytes;
      graph_count += s.count;
    }
  }
  // A fix is named only for a real part of the moment.
  const uint64_t worth = std::max<uint64_t>(r.live_bytes / 10, 1);
  const bool no_grad = graph_bytes >= worth;
  const bool item = r.kept_bytes >= worth;
  if (no_grad && (!item || graph_bytes >= r.kept_bytes)) {
    v.finding.fix = GraphFix::kNoGrad;
    v.finding.bytes = graph_bytes;
    v.finding.count = graph_count;
    v.finding.where = CommonUserLine(graph, graph_bytes, executable, resolver);
  } else if (item) {
    const RetentionStack& top = r.kept.front();
    v.finding.fix = GraphFix::kItem;
    v.finding.bytes = r.kept_bytes;
    v.finding.count = r.kept_count;
    v.finding.steps = top.last_epoch - top.first_epoch + 1;
    v.finding.where = InnermostUserLine(top.stack, executable, resolver);
  }
  v.finding.backward_passes = r.backward_passes;
  return v;
}

}  // namespace cumemtrace::analyzer
