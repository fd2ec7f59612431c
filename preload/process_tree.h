// Whether a process above this one is tracing. A process that loads the preload but never makes a CUDA memory call
// (a wrapper: timeout, bash, time, perf, torchrun's launcher) must not keep the programs it starts from tracing;
// one that traces must (unless CUMEMTRACE_FOLLOW_EXEC=1), or every helper it starts would write a trace too. A
// tracing process is told apart by its flush thread's name, which no other thread of it has.
#ifndef CUMEMTRACE_PRELOAD_PROCESS_TREE_H_
#define CUMEMTRACE_PRELOAD_PROCESS_TREE_H_

#include <sys/types.h>

namespace cumemtrace::preload {

// The name the flush thread is given when it starts (a thread's name holds at most 15 bytes).
inline constexpr char kFlushThreadName[] = "cumemtrace";

enum class AncestorTracing {
  kYes,      // the parent, or a process above it, has a thread named kFlushThreadName
  kNo,       // none has, as far as /proc shows them (up to pid 1, or to a parent another pid namespace hides)
  kUnknown,  // /proc does not show this process's parent
};

// Walks the parents of `pid` through /proc (at most 64 of them). Reads a few small files per process: call it once
// per process, not per event.
AncestorTracing AncestorOf(pid_t pid);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PROCESS_TREE_H_
