// The progress line: drawn only on a terminal (here forced, with no start delay), erased when done, and never
// seen by a file or a pipe (the tool run in-process writes its stderr to a file).
#include "analyzer/progress.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/training_run.h"

namespace cumemtrace::analyzer::test {
namespace {

std::string Contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) out.append(buffer, n);
  return out;
}

TEST(Progress, QuietWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  {
    ProgressBar bar(f, "reading t.pb");
    EXPECT_FALSE(bar.active());
    bar.Update(5'000'000, 0.5);
  }
  EXPECT_EQ(Contents(f), "");
  std::fclose(f);
}

TEST(Progress, DrawsAndErasesOnATerminal) {
  std::FILE* f = std::tmpfile();
  {
    ProgressBar bar(f, "reading t.pb", true, std::chrono::milliseconds(0));
    bar.Update(1'500'000, 0.5);
    bar.Done();
  }
  const std::string line = "cumem-analyze: reading t.pb  1.5 M events  [==========          ] 50%";
  EXPECT_EQ(Contents(f), "\r" + line + "\r" + std::string(line.size(), ' ') + "\r");
  std::fclose(f);
}

TEST(Progress, UnknownTotalShowsEventsOnly) {
  std::FILE* f = std::tmpfile();
  {
    ProgressBar bar(f, "reading t.pb", true, std::chrono::milliseconds(0));
    bar.Update(2'000'000, -1);
    EXPECT_EQ(Contents(f), "\rcumem-analyze: reading t.pb  2.0 M events");
  }
  std::fclose(f);
}

TEST(Progress, TheAnalysisCallbackShowsTheShareOfTheFileRead) {
  std::FILE* f = std::tmpfile();
  {
    ProgressBar bar(f, "reading t.pb", true, std::chrono::milliseconds(0));
    bar.EventsCallback()(1'500'000, 0.5);
    EXPECT_EQ(Contents(f), "\rcumem-analyze: reading t.pb  1.5 M events  [==========          ] 50%");
  }
  std::fclose(f);
}

TEST(Progress, ToolOutputToAFileHasNoProgress) {
  const std::string trace = WriteTrainingRun("progress_run.pb", true);
  for (const char* command : {"summary", "html"}) {
    const std::string out = ::testing::TempDir() + "/progress.html";
    ToolResult r = std::string(command) == "html" ? Tool({"html", trace, "-o", out}) : Tool({command, trace});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err.find('\r'), std::string::npos) << command;
    std::remove(out.c_str());
  }
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
