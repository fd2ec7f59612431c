#include "tests/unit/analyzer/cli_runner.h"

#include <cstdio>
#include <optional>

#include "analyzer/commands/run_cli.h"
#include "gtest/gtest.h"

namespace cumemtrace::analyzer::test {
namespace {

std::string ReadAndClose(std::FILE* f) {
  std::string s;
  std::rewind(f);
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

}  // namespace

ToolResult Tool(const std::vector<std::string>& args) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  ToolResult r;
  r.code = RunCli(args, out, err);
  r.out = ReadAndClose(out);
  r.err = ReadAndClose(err);
  return r;
}

JsonValue Json(const ToolResult& r) {
  std::string error;
  std::optional<JsonValue> v = JsonValue::Parse(r.out, &error);
  EXPECT_TRUE(v.has_value()) << error << "\n" << r.out;
  return v.value_or(JsonValue());
}

}  // namespace cumemtrace::analyzer::test
