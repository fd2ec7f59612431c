// RunCli: parse, then --help, --version, or the subcommand's own run function.
#include "analyzer/commands/run_cli.h"

#include "absl/strings/str_cat.h"
#include "analyzer/commands/command.h"
#include "analyzer/commands/command_line.h"
#include "analyzer/commands/registry.h"
#include "proto/format.h"

#ifndef CUMEMTRACE_VERSION
#define CUMEMTRACE_VERSION "unknown"
#endif

namespace cumemtrace::analyzer {

int RunCli(const std::vector<std::string>& args, std::FILE* out, std::FILE* err) {
  Console console(out, err);
  absl::StatusOr<CommandLine> parsed = ParseCommandLine(args);
  if (!parsed.ok()) {
    return console.Error(absl::StrCat(parsed.status().message(), " (see ", kToolName, " --help)"));
  }
  const CommandLine& cl = *parsed;
  if (cl.help) return console.Report(cl.command != nullptr ? CommandHelp(*cl.command) : ToolHelp());
  if (cl.version) {
    return console.Report(absl::StrCat(kToolName, " ", CUMEMTRACE_VERSION, " (reads trace format versions up to ",
                                       format::kFormatVersion, ")\n"));
  }
  return cl.command->run(cl, console);
}

}  // namespace cumemtrace::analyzer
