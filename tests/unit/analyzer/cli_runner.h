// Runs cumem-analyze in-process (RunCli) the way a user runs the binary, and hands back its exit status, stdout and
// stderr; parses stdout as JSON. One helper for every test that checks the tool's output.
#ifndef CUMEMTRACE_TESTS_UNIT_ANALYZER_CLI_RUNNER_H_
#define CUMEMTRACE_TESTS_UNIT_ANALYZER_CLI_RUNNER_H_

#include <string>
#include <vector>

#include "tests/unit/analyzer/json_value.h"

namespace cumemtrace::analyzer::test {

struct ToolResult {
  int code = -1;
  std::string out;
  std::string err;
};

// cumem-analyze with `args` (without the program name).
ToolResult Tool(const std::vector<std::string>& args);

// stdout as JSON; a test failure (and a null value) when it does not parse.
JsonValue Json(const ToolResult& result);

}  // namespace cumemtrace::analyzer::test

#endif  // CUMEMTRACE_TESTS_UNIT_ANALYZER_CLI_RUNNER_H_
