// Remembers the native stacks a thread took, with where each of their return addresses lies on the thread's stack,
// so that a stack taken again from the same place costs a few memory reads instead of an unwind. Unwinding is the
// largest part of the hook's time (docs/performance.md): tens of nanoseconds per frame, on every PyTorch block.
//
// A stack is looked up by the stack pointer at CaptureStack (where the hook was entered) and the request (depth,
// whether the outermost frames are kept). An entry holds the result as the unwinder gave it and, for each frame
// kept, the address of the stack slot its return address came from. It is taken only if every slot still holds
// that frame's address: the frames are the same calls, at the same places, so the unwinder, which reads those
// slots, would return the same frames. (Each frame's call pushed its return address just below its caller's
// frame, and those slots lie between the stack pointer and the thread's stack base: live memory of this thread.)
// Anything that breaks the rule when an entry is made (a signal frame, a frame whose return address is not where
// the call put it) makes no entry.
//
// An entry is made the second time in a row that one place misses, with a second walk of the stack (unw_step, which
// reports where each frame lies), so a stack taken once costs one extra lookup and nothing else. Only stacks
// returned whole (or cut to their innermost frames) are kept: one that drops frames in the middle depends on frames
// the slots do not cover.
//
// Tables are per thread (a slot address means nothing on another thread's stack), made on the thread's first stack
// (mmap, about 200 KiB, of which only the entries used are touched) and unmapped when it exits.
// CUMEMTRACE_UNWIND_MEMO=0 turns the memo off; =check unwinds every stack as well and counts the entries that would
// have given another stack (said at exit; expected: none).
#ifndef CUMEMTRACE_PRELOAD_UNWIND_MEMO_H_
#define CUMEMTRACE_PRELOAD_UNWIND_MEMO_H_

#include <stdint.h>

namespace cumemtrace::preload {

enum class UnwindMemoMode { kOff, kOn, kCheck };

// Reads CUMEMTRACE_UNWIND_MEMO and prepares the per-thread tables' cleanup. Call once, before any lookup.
void InitUnwindMemo();
UnwindMemoMode UnwindMemoModeNow();

// A remembered stack for this place and request: fills pcs, *truncated, *dropped and returns the frame count, or
// returns -1.
int UnwindMemoLookup(uintptr_t place, int max_depth, bool keep_outermost, uintptr_t* pcs, bool* truncated,
                     uint32_t* dropped);

// After a miss and an unwind that gave pcs[0, count): remembers it when this place missed just before (and the
// stack checks out). Must be called from the frame that unwound, or one called from it.
void UnwindMemoLearn(uintptr_t place, int max_depth, bool keep_outermost, const uintptr_t* pcs, int count,
                     bool truncated, uint32_t dropped);

// For CUMEMTRACE_UNWIND_MEMO=check: a remembered stack differed from the unwinder's (counted, said at exit).
void UnwindMemoNoteMismatch();
// Says at exit how the memo did, when checking.
void UnwindMemoReport();

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_UNWIND_MEMO_H_
