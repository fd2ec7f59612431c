// The stack an event carries, made from a stack kept with its Python frames apart (OutputQueue::KeepPythonStack):
// the Python frames spliced into the native frames where the interpreter ran them (python_splice.h), or, where
// Python runs but the thread had no frames, a marker frame after the native ones. Done by the writer, under its
// lock, off the program's threads.
#ifndef CUMEMTRACE_PRELOAD_STACK_COMPOSE_H_
#define CUMEMTRACE_PRELOAD_STACK_COMPOSE_H_

#include <stdint.h>

#include "preload/output_queue.h"

namespace cumemtrace::preload {

// Writes the stack's frames (innermost first, at most `max_out`, the outermost cut) to `out`; returns their count.
int ComposeKeptStack(const OutputQueue::KeptStack& stack, uint64_t* out, int max_out);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_STACK_COMPOSE_H_
