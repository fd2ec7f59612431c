#include "preload/stack_compose.h"

#include <string.h>

#include "preload/config.h"
#include "preload/python_frames.h"
#include "preload/python_splice.h"
#include "proto/format.h"

namespace cumemtrace::preload {

int ComposeKeptStack(const OutputQueue::KeptStack& stack, uint64_t* out, int max_out) {
  int native_count = stack.native_count < kMaxStackDepth ? stack.native_count : kMaxStackDepth;
  if (max_out <= 0) return 0;
  if (!stack.has_python) {
    const int n = native_count < max_out ? native_count : max_out;
    memcpy(out, stack.native, sizeof(uint64_t) * static_cast<size_t>(n));
    return n;
  }
  if (stack.python_count == 0) {  // no Python thread state, or no frames: say so in the outermost frame
    const int n = native_count < max_out - 1 ? native_count : max_out - 1;
    memcpy(out, stack.native, sizeof(uint64_t) * static_cast<size_t>(n));
    out[n] = format::PcOfPythonFrameId(format::kNoPythonFramesId);
    return n + 1;
  }
  static_assert(sizeof(uintptr_t) == sizeof(uint64_t), "stacks are kept as 64-bit words");
  const auto* native = reinterpret_cast<const uintptr_t*>(stack.native);
  bool is_eval[kMaxStackDepth];
  for (int i = 0; i < native_count; ++i) is_eval[i] = IsEvalLoopPc(native[i]);
  SpliceInput in{native, is_eval, native_count, stack.python, stack.group_end, stack.group_count};
  bool matched = false;
  return SplicePythonFrames(in, out, max_out, &matched);
}

}  // namespace cumemtrace::preload
