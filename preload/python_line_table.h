// CPython's line tables: the map from an instruction of a code object to its source line, in the two formats the
// supported versions use. Pure functions of the table's bytes, tested against the interpreter's own `co_lines()`
// (tests/unit/preload/python_line_table_test.py).
#ifndef CUMEMTRACE_PRELOAD_PYTHON_LINE_TABLE_H_
#define CUMEMTRACE_PRELOAD_PYTHON_LINE_TABLE_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

enum class LineTableFormat : uint8_t {
  kAddressPairs,  // 3.10's co_linetable (PEP 626): (bytecode length, line delta) byte pairs
  kLocations,     // 3.11+'s co_linetable: entries of code units with line, column and end positions
};

// The line of code unit `instr` (an index in 2-byte code units) of a code object whose first line is `first_line`
// and whose line table is `table` (`size` bytes); 0 when the instruction has no line or the table does not parse.
uint32_t DecodeLine(LineTableFormat format, const uint8_t* table, size_t size, int first_line, int32_t instr);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PYTHON_LINE_TABLE_H_
