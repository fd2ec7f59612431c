// cumem-analyze as a function: parses arguments, runs the subcommand, writes the report to `out` and warnings and
// errors to `err`, and returns the exit status (0 done, 1 unreadable trace, 2 bad usage). main() is a thin shell
// around it, so tests run the exact tool in-process.
#ifndef CUMEMTRACE_ANALYZER_CLI_H_
#define CUMEMTRACE_ANALYZER_CLI_H_

#include <cstdio>
#include <string>
#include <vector>

#include "analyzer/model/trace_info.h"

namespace cumemtrace::analyzer {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 1;
inline constexpr int kExitUsage = 2;

// `args` excludes the program name.
int RunCli(const std::vector<std::string>& args, std::FILE* out, std::FILE* err);

// The warnings (one per line) for a trace whose events could not all be ordered, that is cut off or has no
// trailer; "" for a clean trace.
std::string TraceWarning(const TraceInfo& info);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_CLI_H_
