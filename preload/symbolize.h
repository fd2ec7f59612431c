// Names for every pc in the trace's stack table, written at a clean end (Strings + Symbols packets) so the trace
// reads on a machine without the binaries; with file and line from debug info (debug_lines.h) where a module has
// it, unless CUMEMTRACE_LINES=0. The debug-info pass is bounded (5 s in all, 2 s per module, debug files up to
// 2 GiB); when it found lines, a Notice SYMBOLS_FROM_DEBUG_INFO says how many and where it stopped. Runs once, at
// exit, never on the event path.
#ifndef CUMEMTRACE_PRELOAD_SYMBOLIZE_H_
#define CUMEMTRACE_PRELOAD_SYMBOLIZE_H_

#include "preload/byte_buffer.h"

namespace cumemtrace::preload {

class StackTable;
class ModuleMap;
class StringTable;

// Appends Strings and Symbols packets for all native pcs of `stacks` to `out`; names are interned in the trace's
// string table `names` (its pending strings are written first).
void WriteSymbolTable(ByteBuffer* out, const StackTable& stacks, ModuleMap& modules, StringTable* names);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_SYMBOLIZE_H_
