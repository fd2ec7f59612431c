// One subcommand of cumem-analyze, as it declares itself: its name, what it takes, what its --help says, and the
// function that runs it. Every subcommand lives in its own file in this folder and defines one CommandSpec;
// registry.cc lists them all, and that list is the only place that knows which subcommands exist (parsing,
// --help and dispatch all read it).
//
// How a command runs (the one path from trace to output):
//   read + model    AnalyzeTrace (analyze_step.h), or a pass of model/ for commands that stream the trace
//   report          a struct built by reports/ from the model
//   render          text, JSON or a file format from render/ or export/
//   output          through Console (console.h): nothing reaches stdout or the output file until the input
//                   was read without error; errors are one line on stderr; exit codes are Console's.
#ifndef CUMEMTRACE_ANALYZER_COMMANDS_COMMAND_H_
#define CUMEMTRACE_ANALYZER_COMMANDS_COMMAND_H_

#include <cstdint>

#include "analyzer/commands/command_line.h"
#include "analyzer/commands/console.h"

namespace cumemtrace::analyzer {

// The traces a command takes after its name.
enum class Operands : uint8_t { kOneTrace, kTwoTraces, kManyTraces };

// Whether -o is needed (the flag itself must also be in `flags`).
enum class OutputFile : uint8_t { kNone, kOptional, kRequired };

struct CommandSpec {
  const char* name;
  const char* synopsis;  // what follows `cumem-analyze NAME` in the usage line
  const char* help;      // what it does, for --help (lines of at most 100 columns, indented by the printer)
  Operands operands;
  uint32_t flags;        // the Flag bits it takes
  OutputFile output;
  int (*run)(const CommandLine& cl, Console& console);
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_COMMANDS_COMMAND_H_
