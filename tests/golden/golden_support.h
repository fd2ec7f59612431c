// What the golden tests on real GPU traces share: where the examples are, the truth JSON each workload wrote on the
// GPU machine, and `cumem-analyze ARGS --json` run in-process (tests/unit/analyzer/cli_runner.h), parsed. Expected
// figures always come from the truth, never from the analyzer's own output.
#ifndef CUMEMTRACE_TESTS_GOLDEN_GOLDEN_SUPPORT_H_
#define CUMEMTRACE_TESTS_GOLDEN_GOLDEN_SUPPORT_H_

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "analyzer/commands/run_cli.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/json_value.h"

namespace cumemtrace::analyzer::golden {

using test::JsonValue;

inline std::string Example(const std::string& name) {
  return std::string(CUMEMTRACE_EXAMPLES_DIR) + "/" + name;
}

// The names (without .pb) of every trace in examples/, sorted: the parameters of the tests that run on each.
inline std::vector<std::string> ExampleTraces() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(CUMEMTRACE_EXAMPLES_DIR)) {
    if (entry.path().extension() == ".pb") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

inline JsonValue ParseOrFail(const std::string& text, const std::string& what) {
  std::string error;
  std::optional<JsonValue> v = JsonValue::Parse(text, &error);
  EXPECT_TRUE(v.has_value()) << what << ": " << error;
  return v.value_or(JsonValue());
}

// The truth JSON the workload wrote on the GPU machine.
inline JsonValue Truth(const std::string& name) {
  std::ifstream in(Example(name));
  EXPECT_TRUE(in.good()) << "cannot read " << Example(name);
  std::stringstream text;
  text << in.rdbuf();
  return ParseOrFail(text.str(), name);
}

// `cumem-analyze ARGS --json`: the report, parsed; a failure if the tool does not exit 0.
inline JsonValue Report(std::vector<std::string> args) {
  args.push_back("--json");
  test::ToolResult r = test::Tool(args);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  return ParseOrFail(r.out, args[0]);
}

// The sequence number of a checkpoint's marker in `events` (an events report): the one driver allocation of `size`
// bytes the workload made right after reading PyTorch's figures (tests/gpu/workloads/allocator_common.py).
inline uint64_t MarkerSeq(const JsonValue& events, uint64_t size) {
  uint64_t seq = 0;
  int found = 0;
  for (const JsonValue& e : events["events"].array()) {
    const std::string api = e["api"].str();
    if ((api == "cuMemAlloc" || api == "cudaMalloc") && e["size"].type() == JsonValue::Type::kNumber &&
        e["size"].uinteger() == size) {
      seq = e["seq"].uinteger();
      ++found;
    }
  }
  EXPECT_EQ(found, 1) << "marker of " << size << " bytes";
  return seq;
}

}  // namespace cumemtrace::analyzer::golden

#endif  // CUMEMTRACE_TESTS_GOLDEN_GOLDEN_SUPPORT_H_
