// The one line a traced process prints on stderr at a clean end, so that users learn where the trace went and how
// to read it: "cumemtrace: wrote run.1234.pb (56 000 events, 1.2 MB): cumem-analyze run.1234.pb". Formatted into
// a caller's buffer with no allocation (it runs in a destructor, possibly after the C++ runtime has shut down).
#ifndef CUMEMTRACE_PRELOAD_EXIT_NOTICE_H_
#define CUMEMTRACE_PRELOAD_EXIT_NOTICE_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

// `value` with a space between groups of three digits: 56000 -> "56 000".
void FormatGrouped(uint64_t value, char* out, size_t out_size);

// A size for people, decimal units with one decimal: 999 -> "999 B", 1234 -> "1.2 kB", 1234567 -> "1.2 MB".
void FormatSize(uint64_t bytes, char* out, size_t out_size);

// The path to print for a trace created at `path`, which was relative to `created_in` (the working folder when the
// file was created), for the shell the program was started from, in `started_in` (the working folder when the
// preload was loaded): `path` itself where the two folders are the same (or either is unknown: ""), else the
// absolute path, so that a program that changed its folder first (Hydra does) does not send its user to look for the
// trace in the wrong one. An absolute `path` is kept as it is.
void DisplayPath(const char* path, const char* created_in, const char* started_in, char* out, size_t out_size);

// The whole line without the "cumemtrace: " prefix and the newline. `path` is single-quoted in the command when it
// holds anything a shell would split or expand.
void FormatWroteLine(const char* path, uint64_t events, uint64_t bytes, char* out, size_t out_size);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_EXIT_NOTICE_H_
