// `cumem-analyze symbolize IN.pb [-o OUT.pb] [--debug-dir DIR]...`: for a trace whose process died before it wrote
// its symbols (no Symbols packet), or whose pcs lack file and line, resolves those pcs from the modules' files and
// writes a new trace: the original packets, then Strings + Symbols (function, offset, file, line), then the trailer
// if there was one. A module's file is taken by its path when its build id matches, else DIR/.build-id/xx/rest.debug
// and DIR/<basename> of each --debug-dir. It never changes the input and never replaces an existing file.
#ifndef CUMEMTRACE_ANALYZER_TOOLS_SYMBOLIZE_COMMAND_H_
#define CUMEMTRACE_ANALYZER_TOOLS_SYMBOLIZE_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cumemtrace::analyzer {

struct SymbolizeOptions {
  std::string input;
  std::string output;  // "" = input with ".symbolized.pb" in place of ".pb"
  std::vector<std::string> debug_dirs;
};

// "run.pb" -> "run.symbolized.pb"; other names get ".symbolized.pb" appended.
std::string DefaultSymbolizedPath(const std::string& input);

// Writes the new trace; returns what was resolved, for people (several lines).
absl::StatusOr<std::string> Symbolize(const SymbolizeOptions& options);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_TOOLS_SYMBOLIZE_COMMAND_H_
