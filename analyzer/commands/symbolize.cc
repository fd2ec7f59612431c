// `cumem-analyze symbolize TRACE.pb [-o OUT.pb] [--debug-dir DIR]...`: a copy of the trace with symbols added.
#include "analyzer/commands/command.h"
#include "analyzer/tools/symbolize_command.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  absl::StatusOr<std::string> report = Symbolize(SymbolizeOptions{cl.trace, cl.output, cl.debug_dirs});
  if (!report.ok()) return console.Error(report.status());
  return console.Report(*report);
}

}  // namespace

extern const CommandSpec kSymbolizeCommand = {
    "symbolize", "TRACE.pb [-o OUT.pb] [--debug-dir DIR]...",
    "writes a copy with names, files and lines from the binaries for pcs that lack them (a process that died\n"
    "before writing its symbols); modules are found by path when the build id matches, else as\n"
    "DIR/.build-id/xx/rest.debug or DIR/<file name> of each --debug-dir; default OUT: TRACE with .symbolized.pb;\n"
    "never replaces an existing file",
    Operands::kOneTrace, kFlagOutput | kFlagDebugDir, OutputFile::kOptional, Run};

}  // namespace cumemtrace::analyzer
