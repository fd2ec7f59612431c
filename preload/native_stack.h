// Native stacks with libunwind's unw_backtrace (fast path with a per-thread cache), or from the unwind memo when
// the thread took the same stack from the same place before (unwind_memo.h). Frames inside libcumemtrace.so itself
// are left out, so a stack reads as if the program called CUDA directly.
#ifndef CUMEMTRACE_PRELOAD_NATIVE_STACK_H_
#define CUMEMTRACE_PRELOAD_NATIVE_STACK_H_

#include <stdint.h>

namespace cumemtrace::preload {

// Our own frames in a stack (recorder, hooks, wrappers): never more than this many.
inline constexpr int kMaxOwnFrames = 16;

// Sets libunwind's caching policy and finds this library's own address range. Call once before CaptureStack.
void InitNativeStacks();

// Fills `pcs` (innermost first) with at most `max_depth` frames of the caller's stack. Returns the frame count;
// returns -1 when unwinding failed. A stack deeper than max_depth keeps its innermost frames (where CUDA was
// called) and its outermost ones (main, the program's own entry points, where the user's lines are) and drops the
// middle: *truncated is set and *dropped counts the frames left out.
// `keep_outermost` false: a deeper stack keeps only its innermost frames (one cheap unwind), for callers whose
// user lines come from elsewhere (the thread's Python frames, which are never cut).
// `memo_note`, if given: set to the unwind memo's note of the entry the frames came from (unwind_memo.h), nullptr
// when they were unwound.
int CaptureStack(uintptr_t* pcs, int max_depth, bool* truncated, uint32_t* dropped, bool keep_outermost = true,
                 uint64_t** memo_note = nullptr);

// How a stack of `max_depth` frames is split when the real one is deeper: the outermost frames kept.
int OutermostFramesKept(int max_depth);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_NATIVE_STACK_H_
