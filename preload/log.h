// Warnings on stderr from inside a traced process: formatted into a stack buffer and written with one write(2), so
// they never allocate, never use stdio's locks (a hook may run while the program holds them) and keep errno.
#ifndef CUMEMTRACE_PRELOAD_LOG_H_
#define CUMEMTRACE_PRELOAD_LOG_H_

#include <stddef.h>

namespace cumemtrace::preload {

// Writes "cumemtrace: <message>\n" to stderr.
void Warn(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Writes `value` in decimal into `out` (always NUL-terminated).
void FormatDecimal(long long value, char* out, size_t out_size);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_LOG_H_
