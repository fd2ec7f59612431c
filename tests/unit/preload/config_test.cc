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
  bool result = ExpandOutputPattern(pattern, 4242, "gpu-host", out, sizeof(out));
  if (ok != nullptr) *ok = result;
  return result ? std::string(out) : std::string("<failed>");
}

TEST(ExpandOutputPattern, Substitutes) {
  EXPECT_EQ(Expand("run.%p.pb"), "run.4242.pb");
  EXPECT_EQ(Expand("%h-%p-%%.pb"), "gpu-host-4242-%.pb");
  EXPECT_EQ(Expand("plain.pb"), "plain.pb");
  EXPECT_EQ(Expand(""), "");
}

TEST(ExpandOutputPattern, RejectsUnknownSequencesAndOverflow) {
  bool ok = true;
  Expand("run.%r.pb", &ok);
  EXPECT_FALSE(ok);
  Expand("trailing%", &ok);
  EXPECT_FALSE(ok);
  Expand(std::string(63, 'x').c_str(), &ok);  // 63 characters + NUL fit in 64
  EXPECT_TRUE(ok);
  Expand(std::string(64, 'x').c_str(), &ok);
  EXPECT_FALSE(ok);
}

TEST(ReadConfig, DefaultsAndOverrides) {
  unsetenv("CUMEMTRACE_OUTPUT");
  unsetenv("CUMEMTRACE_STACK_DEPTH");
  unsetenv("CUMEMTRACE_FLUSH_MS");
  unsetenv("CUMEMTRACE_OVERWRITE");
  unsetenv("CUMEMTRACE_DISABLE");
  Config c;
  ReadConfig(&c);
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

}  // namespace
}  // namespace cumemtrace::preload
