// Names for every pc in the trace's stack table, written at a clean end (Strings + Symbols packets) so the trace
// reads on a machine without the binaries. Runs once, at exit, never on the event path.
#ifndef CUMEMTRACE_PRELOAD_SYMBOLIZE_H_
#define CUMEMTRACE_PRELOAD_SYMBOLIZE_H_

#include "preload/byte_buffer.h"

namespace cumemtrace::preload {

class StackTable;
class ModuleMap;

// Appends Strings and Symbols packets for all pcs of `stacks` to `out`.
void WriteSymbolTable(ByteBuffer* out, const StackTable& stacks, ModuleMap& modules);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_SYMBOLIZE_H_
