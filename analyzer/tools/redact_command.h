// `cumem-analyze redact IN.pb -o OUT.pb`: a copy of a trace that can be shared: no host name, argv reduced to the
// program's name and its own arguments, and every path outside the program's own tree reduced (path_redaction.h has
// the rules): the header's executable, module paths, Python frame files, source files of symbols, paths in notices.
// All numbers, stacks and function names stay, so every report is the same but for those strings. The trace format
// holds no environment variables, so there is none to remove. Never replaces an existing file.
#ifndef CUMEMTRACE_ANALYZER_TOOLS_REDACT_COMMAND_H_
#define CUMEMTRACE_ANALYZER_TOOLS_REDACT_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"

namespace cumemtrace::analyzer {

struct RedactOptions {
  std::string input;
  std::string output;
};

// Writes the copy; returns what was changed, for people.
absl::StatusOr<std::string> Redact(const RedactOptions& options);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_TOOLS_REDACT_COMMAND_H_
