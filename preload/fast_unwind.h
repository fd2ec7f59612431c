// The preload's own stack walker for x86-64: the same return addresses libunwind's unw_backtrace gives, for less.
//
// Why not libunwind alone: unwinding was half of the preload's time per event in a PyTorch training step on the GPU
// machine (~40 ns per frame, docs/performance.md, run 11), and libunwind's fast path is general: a per-thread
// cache of frame descriptions behind a cursor, and one frame it cannot take sends the whole stack to its slow
// DWARF walk. This walker caches one 16-byte rule per return address (eh_frame.h) in one table that all threads
// share, and steps each frame with one probe of it and at most two reads of the stack; at the first frame it does
// not take, libunwind walks the whole stack, so a stack is never a mix of two walkers' results.
//
// Every read of the stack is checked against the calling thread's stack bounds; the rule table is read without a
// lock (each entry is re-checked after it is read) and filled under a lock that is only ever tried, never waited
// for, so a fork or a signal cannot deadlock it.
#ifndef CUMEMTRACE_PRELOAD_FAST_UNWIND_H_
#define CUMEMTRACE_PRELOAD_FAST_UNWIND_H_

namespace cumemtrace::preload {

// Fills out[0, max) with the return addresses of the caller's stack, innermost first: out[0] is the return
// address into the function that called FastBacktrace, as unw_backtrace's buffer[0] is. Returns the count, or -1
// when a frame needs libunwind (no unwind table, an unsupported rule, a stack outside the thread's bounds, the
// rule table busy).
// `frames_reused`: where given, how many of the frames came from the thread's previous walk (fast_unwind.cc).
int FastBacktrace(void** out, int max, int* frames_reused = nullptr);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_FAST_UNWIND_H_
