// Native stacks with libunwind's unw_backtrace (fast path with a per-thread cache). Frames inside
// libcumemtrace.so itself are left out, so a stack reads as if the program called CUDA directly.
#ifndef CUMEMTRACE_PRELOAD_NATIVE_STACK_H_
#define CUMEMTRACE_PRELOAD_NATIVE_STACK_H_

#include <stdint.h>

namespace cumemtrace::preload {

// Sets libunwind's caching policy and finds this library's own address range. Call once before CaptureStack.
void InitNativeStacks();

// Fills `pcs` (innermost first) with at most `max_depth` frames of the caller's stack. Returns the frame count;
// sets *truncated when the stack was deeper than max_depth, and returns -1 when unwinding failed.
int CaptureStack(uintptr_t* pcs, int max_depth, bool* truncated);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_NATIVE_STACK_H_
