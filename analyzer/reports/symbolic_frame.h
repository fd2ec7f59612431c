// Frames by what they mean, not where they were loaded: function, file (after site-packages/, else its base name)
// and line, or function and module name when there is no file. Two runs on two machines load libraries at other
// addresses and check code out into other folders, so whatever compares or merges stacks across traces (diff),
// and whatever names frames for other tools (folded stacks, pprof, the HTML flamegraph), goes through here. It must
// never use an address, stack id or string id: they differ between traces.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_SYMBOLIC_FRAME_H_
#define CUMEMTRACE_ANALYZER_REPORTS_SYMBOLIC_FRAME_H_

#include <string>
#include <vector>

#include "analyzer/model/stacks/frame_resolver.h"

namespace cumemtrace::analyzer {

// A frame's identity across traces: "py|train_step|train.py|37", "c|c10::alloc|CUDACachingAllocator.cpp|120",
// "c|cudaMalloc|libcudart.so.13|0".
std::string SymbolicKey(const Frame& frame);

// A frame's name for a flamegraph: "train_step (train.py:37)", "c10::alloc (CUDACachingAllocator.cpp:120)",
// "cudaMalloc [libcudart.so.13]", "?? [libfoo.so]". Never holds ';' or a newline (folded stacks split on them).
std::string FlameName(const Frame& frame);

// The identity of a stack: SymbolicKey of each frame, innermost first, joined by '\n'.
std::string SymbolicStackKey(const std::vector<Frame>& frames);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_SYMBOLIC_FRAME_H_
