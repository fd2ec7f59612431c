// cumem-analyze's command line, parsed: which command, its operands (traces) and every flag's value. Parsing is
// pure (it reads no file and prints nothing), so that usage errors are testable and say exactly what is wrong.
// Which flags a command takes is the command's own declaration (command.h); the parser checks each flag given
// against it, so a flag that a command would ignore is an error, never silently dropped.
#ifndef CUMEMTRACE_ANALYZER_COMMANDS_COMMAND_LINE_H_
#define CUMEMTRACE_ANALYZER_COMMANDS_COMMAND_LINE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analyzer/model/usage/phases.h"
#include "analyzer/model/stacks/stack_grouper.h"
#include "analyzer/reports/check_bounds.h"

namespace cumemtrace::analyzer {

struct CommandSpec;

// Every flag cumem-analyze knows, as bits, so that a command declares the set it takes.
enum Flag : uint32_t {
  kFlagJson = 1u << 0,
  kFlagTop = 1u << 1,
  kFlagFrames = 1u << 2,
  kFlagGroupBy = 1u << 3,
  kFlagPhase = 1u << 4,     // --phase NAME and --window START_MS:END_MS
  kFlagOutput = 1u << 5,    // -o / --output
  kFlagDebugDir = 1u << 6,
  kFlagLeaks = 1u << 7,
  kFlagBounds = 1u << 8,    // --max-peak, --max-leak, --no-oom
  kFlagScope = 1u << 9,     // --device, --kind
  kFlagWhatIf = 1u << 10,   // --set KEY:VALUE, --capacity SIZE, --without-outside
};

// What the --help text says about one flag (or one pair of flags that share a bit).
struct FlagHelp {
  Flag flag;
  const char* names;  // as shown: "--top N"
  const char* help;
};

// The flags in the order --help lists them.
const std::vector<FlagHelp>& FlagHelps();

inline constexpr size_t kMaxTop = 1000000;
inline constexpr size_t kMaxFrames = 4096;

struct CommandLine {
  const CommandSpec* command = nullptr;  // never null after a successful parse
  bool help = false;                     // --help: the command's help (or the tool's, without a command)
  bool version = false;                  // --version
  std::vector<std::string> traces;       // the operands, in the order given (ranks: all; diff: two)
  std::string trace;                     // traces[0]
  std::string second_trace;              // diff: traces[1]
  bool json = false;
  size_t top = 10;
  bool top_given = false;
  std::optional<size_t> frames;
  std::string output;                    // -o OUT
  std::vector<std::string> debug_dirs;   // symbolize: --debug-dir DIR, in order
  GroupingOptions grouping{GroupBy::kUser, ""};  // --group-by
  CheckBounds bounds;                    // check: --max-peak, --max-leak, --no-oom; --device and --kind scope
  bool leaks = false;                    // folded, pprof: live at the end instead of live at the peak
  PhaseFilter phase_filter;              // --phase NAME, --window START_MS:END_MS (model/usage/phases.h)
  std::vector<std::string> settings;     // whatif: --set KEY:VALUE, in order
  std::optional<uint64_t> capacity;      // whatif: --capacity SIZE
  bool without_outside = false;          // whatif: --without-outside
};

// `args` excludes the program name. Errors are one line saying what is wrong (InvalidArgument).
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_COMMANDS_COMMAND_LINE_H_
