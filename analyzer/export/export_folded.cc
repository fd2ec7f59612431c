// FoldedStacks: resolve, reverse to root first, merge.
#include "analyzer/export/export_folded.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "analyzer/reports/symbolic_frame.h"

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kMaxFrames = 4096;

std::string CleanRoot(std::string s) {
  for (char& c : s) {
    if (c == ';' || c == '\n') c = ',';
  }
  return s;
}

}  // namespace

std::string FoldedStacks(const std::vector<WeightedStack>& stacks, FrameResolver& resolver) {
  std::map<std::string, uint64_t> lines;
  for (const WeightedStack& w : stacks) {
    if (w.bytes == 0) continue;
    std::string line = CleanRoot(w.root);
    const std::vector<Frame> frames = resolver.ResolveStack(w.stack, kMaxFrames);
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) absl::StrAppend(&line, ";", FlameName(*it));
    if (frames.empty()) absl::StrAppend(&line, ";(no stack)");
    lines[line] += w.bytes;
  }
  std::string out;
  for (const auto& [line, bytes] : lines) absl::StrAppend(&out, line, " ", bytes, "\n");
  return out;
}

}  // namespace cumemtrace::analyzer
