// CUMEMTRACE_OUTPUT expansion and environment parsing.
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "preload/config.h"

namespace cumemtrace::preload {
namespace {

std::string Expand(const char* pattern, bool* ok = nullptr) {
  char out[64];
  bool result = ExpandOutputPattern(pattern, 4242, "gpu-host", "7", out, sizeof(out));
  if (ok != nullptr) *ok = result;
  return result ? std::string(out) : std::string("<failed>");
}

TEST(ExpandOutputPattern, Substitutes) {
  EXPECT_EQ(Expand("run.%p.pb"), "run.4242.pb");
  EXPECT_EQ(Expand("%h-%p-%%.pb"), "gpu-host-4242-%.pb");
  EXPECT_EQ(Expand("plain.pb"), "plain.pb");
  EXPECT_EQ(Expand(""), "");
  EXPECT_EQ(Expand("run.%r.pb"), "run.7.pb");
  EXPECT_EQ(Expand("%%r"), "%r");
}

TEST(ExpandOutputPattern, RejectsUnknownSequencesAndOverflow) {
  bool ok = true;
  Expand("run.%q.pb", &ok);
  EXPECT_FALSE(ok);
  Expand("trailing%", &ok);
  EXPECT_FALSE(ok);
  Expand(std::string(63, 'x').c_str(), &ok);  // 63 characters + NUL fit in 64
  EXPECT_TRUE(ok);
  Expand(std::string(64, 'x').c_str(), &ok);
  EXPECT_FALSE(ok);
}

TEST(RankText, RankThenLocalRankThenPid) {
  char out[32];
  RankText("3", "1", 4242, out, sizeof(out));
  EXPECT_STREQ(out, "3");
  RankText(nullptr, "1", 4242, out, sizeof(out));
  EXPECT_STREQ(out, "1");
  RankText("abc", "x", 4242, out, sizeof(out));
  EXPECT_STREQ(out, "pid4242");
  RankText("", nullptr, 17, out, sizeof(out));
  EXPECT_STREQ(out, "pid17");
  RankText("-2", "0", 17, out, sizeof(out));
  EXPECT_STREQ(out, "0");
}

TEST(ParseRankNumber, OnlyNonNegativeDecimalNumbers) {
  EXPECT_EQ(ParseRankNumber("0"), 0);
  EXPECT_EQ(ParseRankNumber("15"), 15);
  EXPECT_EQ(ParseRankNumber(nullptr), -1);
  EXPECT_EQ(ParseRankNumber(""), -1);
  EXPECT_EQ(ParseRankNumber("-1"), -1);
  EXPECT_EQ(ParseRankNumber(" 1"), -1);
  EXPECT_EQ(ParseRankNumber("1x"), -1);
  EXPECT_EQ(ParseRankNumber("99999999999"), -1);
}

std::string ChildPath(const char* pattern) {
  char out[64];
  return ForkedChildOutputPath(pattern, 99, "h", "r", out, sizeof(out)) ? std::string(out) : "<failed>";
}

TEST(ParseTimeResolution, PowersOfTenFromANanosecondToAMillisecond) {
  EXPECT_EQ(ParseTimeResolution("1ns"), 1u);
  EXPECT_EQ(ParseTimeResolution("ns"), 1u);
  EXPECT_EQ(ParseTimeResolution("100ns"), 100u);
  EXPECT_EQ(ParseTimeResolution("us"), 1000u);
  EXPECT_EQ(ParseTimeResolution("10us"), 10000u);
  EXPECT_EQ(ParseTimeResolution("100us"), 100000u);
  EXPECT_EQ(ParseTimeResolution("1ms"), 1000000u);
  for (const char* bad : {"", "3us", "10", "10 us", "10ms", "1s", "1000ns", "-1us", "1US", "99999999999999999999us"}) {
    EXPECT_EQ(ParseTimeResolution(bad), 0u) << bad;
  }
  EXPECT_EQ(ParseTimeResolution(nullptr), 0u);
}

TEST(ForkedChildOutputPath, UsesTheChildPidOrInsertsIt) {
  EXPECT_EQ(ChildPath("run.%p.pb"), "run.99.pb");
  EXPECT_EQ(ChildPath("run.pb"), "run.99.pb");
  EXPECT_EQ(ChildPath("run.%r.pb"), "run.r.99.pb");
  EXPECT_EQ(ChildPath("trace"), "trace.99");
  EXPECT_EQ(ChildPath("x%%p.pb"), "x%p.99.pb");  // a literal "%p" is not the pid
  EXPECT_EQ(ChildPath(".pb"), ".99.pb");
  EXPECT_EQ(ChildPath(std::string(61, 'x').c_str()), "<failed>");  // no room for ".99"
}

TEST(ReadConfig, DefaultsAndOverrides) {
  unsetenv("CUMEMTRACE_OUTPUT");
  unsetenv("CUMEMTRACE_STACK_DEPTH");
  unsetenv("CUMEMTRACE_FLUSH_MS");
  unsetenv("CUMEMTRACE_OVERWRITE");
  unsetenv("CUMEMTRACE_DISABLE");
  for (const char* name : {"CUMEMTRACE_FOLLOW_FORK", "CUMEMTRACE_FOLLOW_EXEC", "CUMEMTRACE_SAMPLE_MS",
                           "CUMEMTRACE_CUPTI", "CUMEMTRACE_PYTHON", "RANK", "LOCAL_RANK", "WORLD_SIZE"}) {
    unsetenv(name);
  }
  Config c;
  ReadConfig(&c);
  EXPECT_FALSE(c.follow_fork);
  EXPECT_FALSE(c.follow_exec);
  EXPECT_EQ(c.sample_ms, 100);
  EXPECT_FALSE(c.cupti);
  EXPECT_TRUE(c.python_frames);
  EXPECT_EQ(c.rank, -1);
  EXPECT_EQ(c.local_rank, -1);
  EXPECT_EQ(c.world_size, -1);
  EXPECT_EQ(std::string(c.rank_text), "pid" + std::to_string(getpid()));
  EXPECT_EQ(std::string(c.output_pattern), "cumemtrace.%p.pb");
  EXPECT_EQ(std::string(c.output_path), "cumemtrace." + std::to_string(getpid()) + ".pb");
  EXPECT_EQ(c.stack_depth, 64);
  EXPECT_EQ(c.flush_ms, 500);
  EXPECT_FALSE(c.overwrite);
  EXPECT_FALSE(c.disabled);

  setenv("CUMEMTRACE_OUTPUT", "/tmp/x.%p.pb", 1);
  setenv("CUMEMTRACE_STACK_DEPTH", "0", 1);
  setenv("CUMEMTRACE_FLUSH_MS", "20", 1);
  setenv("CUMEMTRACE_OVERWRITE", "1", 1);
  ReadConfig(&c);
  EXPECT_EQ(std::string(c.output_path), "/tmp/x." + std::to_string(getpid()) + ".pb");
  EXPECT_EQ(c.stack_depth, 0);
  EXPECT_EQ(c.flush_ms, 20);
  EXPECT_TRUE(c.overwrite);

  // Bad values fall back to the defaults (with a warning on stderr).
  setenv("CUMEMTRACE_STACK_DEPTH", "9999", 1);
  setenv("CUMEMTRACE_FLUSH_MS", "fast", 1);
  ReadConfig(&c);
  EXPECT_EQ(c.stack_depth, 64);
  EXPECT_EQ(c.flush_ms, 500);
  unsetenv("CUMEMTRACE_OUTPUT");
  unsetenv("CUMEMTRACE_STACK_DEPTH");
  unsetenv("CUMEMTRACE_FLUSH_MS");
  unsetenv("CUMEMTRACE_OVERWRITE");
}

TEST(ReadConfig, NewSwitchesRankAndRankPattern) {
  setenv("CUMEMTRACE_FOLLOW_FORK", "1", 1);
  setenv("CUMEMTRACE_FOLLOW_EXEC", "1", 1);
  setenv("CUMEMTRACE_SAMPLE_MS", "0", 1);
  setenv("CUMEMTRACE_CUPTI", "1", 1);
  setenv("CUMEMTRACE_PYTHON", "0", 1);
  setenv("RANK", "5", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("CUMEMTRACE_OUTPUT", "/tmp/x.%r.pb", 1);
  Config c;
  ReadConfig(&c);
  EXPECT_TRUE(c.follow_fork);
  EXPECT_TRUE(c.follow_exec);
  EXPECT_EQ(c.sample_ms, 0);
  EXPECT_TRUE(c.cupti);
  EXPECT_FALSE(c.python_frames);
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.world_size, 8);
  EXPECT_EQ(std::string(c.output_path), "/tmp/x.5.pb");
  EXPECT_EQ(std::string(c.output_pattern), "/tmp/x.%r.pb");

  setenv("RANK", "zero", 1);  // not a number: absent from the header, %r falls back to LOCAL_RANK
  setenv("CUMEMTRACE_SAMPLE_MS", "-5", 1);
  ReadConfig(&c);
  EXPECT_EQ(c.rank, -1);
  EXPECT_EQ(std::string(c.output_path), "/tmp/x.1.pb");
  EXPECT_EQ(c.sample_ms, 100);
  for (const char* name : {"CUMEMTRACE_FOLLOW_FORK", "CUMEMTRACE_FOLLOW_EXEC", "CUMEMTRACE_SAMPLE_MS",
                           "CUMEMTRACE_CUPTI", "CUMEMTRACE_PYTHON", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                           "CUMEMTRACE_OUTPUT"}) {
    unsetenv(name);
  }
}

}  // namespace
}  // namespace cumemtrace::preload
