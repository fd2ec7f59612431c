// `cumem-analyze redact TRACE.pb -o OUT.pb`: a copy of the trace to share.
#include "analyzer/commands/command.h"
#include "analyzer/tools/redact_command.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  absl::StatusOr<std::string> report = Redact(RedactOptions{cl.trace, cl.output});
  if (!report.ok()) return console.Error(report.status());
  return console.Report(*report);
}

}  // namespace

extern const CommandSpec kRedactCommand = {
    "redact", "TRACE.pb -o OUT.pb",
    "writes a copy to share: no host name, argv reduced to the program and its arguments, paths outside the\n"
    "program's own directory reduced to their name (or what follows site-packages/); never replaces an\n"
    "existing file",
    Operands::kOneTrace, kFlagOutput, OutputFile::kRequired, Run};

}  // namespace cumemtrace::analyzer
