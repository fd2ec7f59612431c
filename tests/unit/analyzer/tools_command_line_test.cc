// The symbolize and redact command lines, and the file rules they share: default output name, never overwrite.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "analyzer/commands/run_cli.h"
#include "analyzer/commands/command.h"
#include "analyzer/commands/command_line.h"
#include "analyzer/tools/symbolize_command.h"
#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

TEST(ToolsCommandLine, SymbolizeTakesOutputAndDebugDirs) {
  absl::StatusOr<CommandLine> cl =
      ParseCommandLine({"symbolize", "run.pb", "--debug-dir", "/a", "-o", "out.pb", "--debug-dir=/b"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_STREQ(cl->command->name, "symbolize");
  EXPECT_EQ(cl->trace, "run.pb");
  EXPECT_EQ(cl->output, "out.pb");
  EXPECT_EQ(cl->debug_dirs, (std::vector<std::string>{"/a", "/b"}));
}

TEST(ToolsCommandLine, RedactNeedsAnOutput) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine({"redact", "run.pb"});
  ASSERT_FALSE(cl.ok());
  EXPECT_EQ(cl.status().message(), "redact needs -o OUT");
  cl = ParseCommandLine({"redact", "run.pb", "--output", "r.pb"});
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(cl->output, "r.pb");
}

TEST(ToolsCommandLine, OutputFlagsBelongToTheTools) {
  EXPECT_EQ(ParseCommandLine({"peak", "run.pb", "-o", "x.pb"}).status().message(),
            "-o is not an option of peak (its options: cumem-analyze peak --help)");
  EXPECT_EQ(ParseCommandLine({"redact", "run.pb", "-o", "x.pb", "--debug-dir", "/d"}).status().message(),
            "--debug-dir is not an option of redact (its options: cumem-analyze redact --help)");
  EXPECT_EQ(ParseCommandLine({"symbolize", "run.pb", "-o"}).status().message(), "-o needs a path");
}

TEST(ToolsCommandLine, DefaultSymbolizedPath) {
  EXPECT_EQ(DefaultSymbolizedPath("run.pb"), "run.symbolized.pb");
  EXPECT_EQ(DefaultSymbolizedPath("/t/trace.123.pb"), "/t/trace.123.symbolized.pb");
  EXPECT_EQ(DefaultSymbolizedPath("run"), "run.symbolized.pb");
}

TEST(ToolsCli, RefusesToOverwriteAndSaysSo) {
  const std::string dir = testing::TempDir();
  const std::string existing = dir + "/tools_cli_existing.pb";
  { std::ofstream(existing) << "keep me"; }
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  EXPECT_EQ(RunCli({"symbolize", "/nonexistent/in.pb", "-o", existing}, out, err), kExitError);
  EXPECT_EQ(RunCli({"redact", "/nonexistent/in.pb", "-o", existing}, out, err), kExitError);
  std::rewind(err);
  char line[512] = {};
  ASSERT_NE(std::fgets(line, sizeof(line), err), nullptr);
  EXPECT_EQ(std::string(line), "cumem-analyze: " + existing + " exists; not overwriting it\n");
  std::ifstream in(existing);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "keep me");
  std::fclose(out);
  std::fclose(err);
  unlink(existing.c_str());
}

TEST(ToolsCli, UnreadableInputIsOneLineAndNoOutputFile) {
  const std::string output = testing::TempDir() + "/tools_cli_never.pb";
  unlink(output.c_str());
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  EXPECT_EQ(RunCli({"symbolize", "/nonexistent/in.pb", "-o", output}, out, err), kExitError);
  EXPECT_NE(access(output.c_str(), F_OK), 0);
  std::fclose(out);
  std::fclose(err);
}

}  // namespace
}  // namespace cumemtrace::analyzer
