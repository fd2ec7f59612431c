// Remembers the native stacks a thread took, with where each of their return addresses lies on the thread's stack,
// so that a stack taken again from the same place costs a few memory reads instead of an unwind. Unwinding is the
// largest part of the hook's time (docs/performance.md): tens of nanoseconds per frame, on every PyTorch block.
//
// A stack is looked up by the place CaptureStack's frame lies at (the stack pointer where the hook was entered) and
// the request (depth, whether the outermost frames are kept). An entry holds the frames the unwinder gave and, for
// each frame from CaptureStack's caller outward (ours included), the stack slot its return address was read from.
// It is taken only if every slot still holds that address: frames whose size their address fixes then lie at the
// same places, so the unwinder would read the same slots and return the same frames. A frame pointer's frame (the
// compiler gives one to every function whose frame size varies at run time: a variable-length array, alloca) ends
// where its rbp says, so the slot the unwinder read that rbp from is checked as well. Stacks for which this does not
// hold make no entry: a realigned frame, an rbp not saved on the stack, a signal frame, a frame whose return
// address is not where its call put it, or a stack cut in the middle (the middle is not checked).
//
// A miss makes an entry, with a second walk of the stack (unw_step, which reports where each frame lies); only one
// miss in 16 does while entries are rarely taken. One hit in 256 is unwound as well and compared: should the two
// ever differ, the memo is turned off for the process and a warning says so.
//
// Tables are per thread (a slot address means nothing on another thread's stack), made on the thread's first stack
// (mmap, about 385 KiB, of which only the entries used are touched) and unmapped when it exits.
// CUMEMTRACE_UNWIND_MEMO=0 turns the memo off; =check unwinds every stack as well and counts the entries that would
// have given another stack (said at exit; expected: none).
#ifndef CUMEMTRACE_PRELOAD_UNWIND_MEMO_H_
#define CUMEMTRACE_PRELOAD_UNWIND_MEMO_H_

#include <stdint.h>

namespace cumemtrace::preload {

enum class UnwindMemoMode { kOff, kOn, kCheck };

// Reads CUMEMTRACE_UNWIND_MEMO and prepares the per-thread tables' cleanup. Call once, before any lookup.
void InitUnwindMemo();

// A remembered stack for this place and request: fills pcs, *truncated, *dropped and returns the frame count, or
// returns -1. *verify: the caller must unwind this stack as well and call UnwindMemoMismatch() if they differ (one
// hit in 256; every hit when checking). *note (on a hit; else nullptr): two words the caller may keep with this
// entry, zero when the entry was made (a new entry for the place starts from zero again); valid until this
// thread's next lookup.
int UnwindMemoLookup(uintptr_t place, int max_depth, bool keep_outermost, uintptr_t* pcs, bool* truncated,
                     uint32_t* dropped, bool* verify, uint64_t** note);

// After a miss and an unwind that gave pcs[0, count): remembers it when this place missed just before (and the
// stack checks out). Must be called from the frame that unwound, or one called from it.
void UnwindMemoLearn(uintptr_t place, int max_depth, bool keep_outermost, const uintptr_t* pcs, int count,
                     bool truncated, uint32_t dropped);

// The stack the last lookup gave differed from the unwinder's: its entry is dropped and the difference counted;
// unless checking (CUMEMTRACE_UNWIND_MEMO=check, which says at exit how many), the memo is turned off for the
// process and a warning says so once.
void UnwindMemoMismatch();
// Says at exit how the memo did, when checking.
void UnwindMemoReport();

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_UNWIND_MEMO_H_
