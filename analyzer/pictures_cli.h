// The subcommands of issue 9 ("pictures and comparisons"): check (a CI gate), diff (two traces), and the files
// for other viewers (folded stacks, pprof, Perfetto, the HTML report). Kept apart from cli.cc so that the reports
// that read one trace and print it stay where they were; cli.cc hands these commands over and nothing else.
#ifndef CUMEMTRACE_ANALYZER_PICTURES_CLI_H_
#define CUMEMTRACE_ANALYZER_PICTURES_CLI_H_

#include <cstdio>

#include "analyzer/command_line.h"

namespace cumemtrace::analyzer {

// check's exit status when a bound is broken; an unreadable trace is 2 for check (kExitUsage), so that 1 means
// only "over a bound" to a CI script.
inline constexpr int kExitCheckFailed = 1;

bool IsPicturesCommand(Command command);
// Runs one of them; returns the exit status.
int RunPicturesCommand(const CommandLine& cl, std::FILE* out, std::FILE* err);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_PICTURES_CLI_H_
