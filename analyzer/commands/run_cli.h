// cumem-analyze as a function: parses arguments, runs the subcommand, writes its output to `out` and warnings and
// errors to `err`, and returns the exit status (console.h). main() is a thin shell around it, so tests run the
// exact tool in-process.
#ifndef CUMEMTRACE_ANALYZER_COMMANDS_RUN_CLI_H_
#define CUMEMTRACE_ANALYZER_COMMANDS_RUN_CLI_H_

#include <cstdio>
#include <string>
#include <vector>

#include "analyzer/commands/console.h"

namespace cumemtrace::analyzer {

// `args` excludes the program name.
int RunCli(const std::vector<std::string>& args, std::FILE* out, std::FILE* err);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_COMMANDS_RUN_CLI_H_
