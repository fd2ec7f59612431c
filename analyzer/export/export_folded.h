// Folded stacks, the input of flamegraph.pl, inferno and speedscope: one line per stack, frames root first joined
// by ';', a space, and its weight (bytes). The timeline ("device 0 total") is the root frame. Frames are named by
// symbolic_frame.h's FlameName, which never holds ';' or a newline, so every line splits back exactly.
#ifndef CUMEMTRACE_ANALYZER_EXPORT_EXPORT_FOLDED_H_
#define CUMEMTRACE_ANALYZER_EXPORT_EXPORT_FOLDED_H_

#include <string>
#include <vector>

#include "analyzer/model/stacks/frame_resolver.h"
#include "analyzer/reports/stack_weights.h"

namespace cumemtrace::analyzer {

// Lines sorted, equal stacks merged (their bytes summed), each ending in '\n'; stacks of 0 bytes left out.
std::string FoldedStacks(const std::vector<WeightedStack>& stacks, FrameResolver& resolver);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_EXPORT_EXPORT_FOLDED_H_
