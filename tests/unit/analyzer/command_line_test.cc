// ParseCommandLine: subcommands, flags in any position, and one-line usage errors.
#include "analyzer/commands/command_line.h"

#include <string>
#include <vector>

#include "analyzer/commands/command.h"

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

TEST(CommandLine, Defaults) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine({"run.pb"});
  ASSERT_TRUE(cl.ok());
  EXPECT_STREQ(cl->command->name, "summary");
  EXPECT_EQ(cl->trace, "run.pb");
  EXPECT_FALSE(cl->json);
  EXPECT_EQ(cl->top, 10u);
  EXPECT_FALSE(cl->top_given);
  EXPECT_FALSE(cl->frames.has_value());
}

TEST(CommandLine, SubcommandsAndFlags) {
  struct Case {
    std::vector<std::string> args;
    const char* command;
    bool json;
    size_t top;
  };
  const std::vector<Case> cases = {
      {{"peak", "run.pb"}, "peak", false, 10},
      {{"leaks", "--json", "run.pb"}, "leaks", true, 10},
      {{"--top", "3", "pinned", "run.pb"}, "pinned", false, 3},
      {{"oom", "run.pb", "--top=0", "--json"}, "oom", true, 0},
      {{"events", "run.pb"}, "events", false, 10},
      {{"events", "run.pb", "--json"}, "events", true, 10},
      {{"summary", "run.pb"}, "summary", false, 10},
      {{"summary", "--", "-weird.pb"}, "summary", false, 10},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CommandLine> cl = ParseCommandLine(c.args);
    ASSERT_TRUE(cl.ok()) << cl.status();
    EXPECT_STREQ(cl->command->name, c.command);
    EXPECT_EQ(cl->json, c.json);
    EXPECT_EQ(cl->top, c.top);
  }
  EXPECT_EQ(ParseCommandLine({"summary", "--", "-weird.pb"})->trace, "-weird.pb");
  EXPECT_EQ(ParseCommandLine({"run.pb", "--frames", "4"})->frames, 4u);
  EXPECT_TRUE(ParseCommandLine({"run.pb", "--help"})->help);
  EXPECT_EQ(ParseCommandLine({"run.pb", "--help"})->command, nullptr);
  EXPECT_STREQ(ParseCommandLine({"peak", "--bogus", "--help"})->command->name, "peak");
  EXPECT_TRUE(ParseCommandLine({"-h"})->help);
  EXPECT_TRUE(ParseCommandLine({"--version"})->version);
  EXPECT_EQ(ParseCommandLine({"-"})->trace, "-");
}

TEST(CommandLine, Errors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "missing the trace file"},
      {{"--json"}, "missing the trace file"},
      {{"peak"}, "missing the trace file after 'peak'"},
      {{"run.pb", "--bogus"}, "unknown option --bogus"},
      {{"run.pb", "--top"}, "--top needs a number"},
      {{"run.pb", "--top", "x"}, "--top takes a number from 0 to 1000000, not 'x'"},
      {{"run.pb", "--top=-1"}, "--top takes a number from 0 to 1000000, not '-1'"},
      {{"run.pb", "--frames", "99999"}, "--frames takes a number from 0 to 4096, not '99999'"},
      {{"bogus", "run.pb"}, "unknown subcommand 'bogus' (one of: summary, peak, leaks, pinned, oom, whatif, events, "
                                "ranks, symbolize, redact, check, diff, folded, html, pprof, perfetto, "
                                "torch-snapshot)"},
      {{"torch-snapshot", "run.pb"}, "torch-snapshot needs -o OUT"},
      {{"torch-snapshot", "run.pb", "-o", "x.pickle", "--leaks"},
       "--leaks is not an option of torch-snapshot (its options: cumem-analyze torch-snapshot --help)"},
      {{"check", "run.pb"}, "check needs at least one of --max-peak SIZE, --max-leak SIZE, --no-oom"},
      {{"check", "run.pb", "--no-oom", "--json"},
       "--json is not an option of check (its options: cumem-analyze check --help)"},
      {{"diff", "a.pb"}, "diff takes two traces: diff A.pb B.pb"},
      {{"ranks"}, "missing the trace files after 'ranks'"},
      {{"peak", "run.pb", "extra"}, "unexpected argument 'extra'"},
      {{"run.1.pb", "run.2.pb"},
       "one trace at a time, not 2 (the traces of a job's ranks side by side: cumem-analyze ranks A.pb B.pb ...)"},
  };
  for (const auto& [args, message] : cases) {
    absl::StatusOr<CommandLine> cl = ParseCommandLine(args);
    ASSERT_FALSE(cl.ok());
    EXPECT_EQ(cl.status().message(), message);
  }
}

}  // namespace
}  // namespace cumemtrace::analyzer
