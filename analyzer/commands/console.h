// Where cumem-analyze's output, warnings and errors go, and what its exit status means: the one place for both,
// so that every command behaves alike.
//
// Exit status (the same for every command):
//   0  done (warnings about a cut-off or damaged trace go to stderr, and still exit 0)
//   1  a finding a script acts on: `check` found a bound broken
//   2  the command could not do what was asked: bad usage, a trace that cannot be read, an output that cannot be
//      written
//
// A command hands its whole output over only once the input was read without error, so a consumer of stdout or
// of the -o file never sees a partial report; errors are one line on stderr, prefixed with the tool's name.
#ifndef CUMEMTRACE_ANALYZER_COMMANDS_CONSOLE_H_
#define CUMEMTRACE_ANALYZER_COMMANDS_CONSOLE_H_

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "analyzer/model/trace_info.h"

namespace cumemtrace::analyzer {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFinding = 1;
inline constexpr int kExitError = 2;

inline constexpr char kToolName[] = "cumem-analyze";

// The warnings (one per line, no final newline) for a trace whose events could not all be ordered, that is
// damaged, cut off or has no trailer; "" for a clean trace.
std::string TraceWarning(const TraceInfo& info);

class Console {
 public:
  Console(std::FILE* out, std::FILE* err) : out_(out), err_(err) {}

  std::FILE* out() const { return out_; }
  std::FILE* err() const { return err_; }

  // The command's report on stdout. kExitOk, or kExitError with one line when stdout cannot take it all.
  int Report(const std::string& text);
  // `bytes` to the file `path` (replaced), or to stdout when `path` is empty. Same result as Report.
  int WriteOutput(const std::string& path, const std::string& bytes);
  // One line on stderr naming what is wrong; returns kExitError.
  int Error(const absl::Status& status);
  int Error(const std::string& message);
  // TraceWarning's lines on stderr, if any.
  void Warn(const TraceInfo& info);
  // `text` on stderr as it is (a warning that is not about the trace's state).
  void Note(const std::string& text);

 private:
  std::FILE* out_;
  std::FILE* err_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_COMMANDS_CONSOLE_H_
