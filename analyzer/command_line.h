// Parses cumem-analyze's command line: `cumem-analyze [subcommand] trace.pb [--json] [--top N] [--frames N]
// [--group-by user|stack|frame=REGEX]`, and the tools that write a new trace: `symbolize IN.pb [-o OUT.pb]
// [--debug-dir DIR]...`, `redact IN.pb -o OUT.pb`; and `ranks A.pb B.pb ... [--json]`.
// Pure: it reads no file and prints nothing, so that usage errors are testable and say exactly what is wrong.
#ifndef CUMEMTRACE_ANALYZER_COMMAND_LINE_H_
#define CUMEMTRACE_ANALYZER_COMMAND_LINE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analyzer/model/phases.h"
#include "analyzer/model/stack_grouper.h"
#include "analyzer/reports/check_bounds.h"

namespace cumemtrace::analyzer {

enum class Command {
  kSummary, kPeak, kLeaks, kPinned, kOom, kEvents, kRanks, kSymbolize, kRedact, kHelp, kVersion,
  // Pictures and comparisons (issue 9): a CI gate, two traces compared, and files for other viewers.
  kCheck, kDiff, kFolded, kHtml, kPprof, kPerfetto,
  kTorchSnapshot,  // PyTorch's memory snapshot (memory_viz), from the torch.* events
};

struct CommandLine {
  Command command = Command::kSummary;
  std::string command_name = "summary";
  std::string trace;                // the (first) trace
  std::vector<std::string> traces;  // ranks: every trace, in the order given
  bool json = false;
  size_t top = 10;
  bool top_given = false;
  std::optional<size_t> frames;
  std::string output;                   // symbolize, redact: -o OUT.pb
  std::vector<std::string> debug_dirs;  // symbolize: --debug-dir DIR, in order
  GroupingOptions grouping{GroupBy::kUser, ""};  // --group-by
  CheckBounds bounds;        // check: --max-peak, --max-leak, --no-oom; --device and --kind also scope exports
  std::string second_trace;  // diff: B.pb
  bool leaks = false;        // folded, pprof: --leaks (live at the end instead of live at the peak)
  PhaseFilter phase_filter;  // --phase NAME, --window START_MS:END_MS (analyzer/model/phases.h)
};

inline constexpr size_t kMaxTop = 1000000;
inline constexpr size_t kMaxFrames = 4096;

// `args` excludes the program name. Errors are one line saying what is wrong (InvalidArgument).
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

// The --help text.
std::string UsageText();

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_COMMAND_LINE_H_
