// The exports for other viewers, each read back by the rules of the viewer's own parser: folded stacks as
// flamegraph.pl (`^(.*)\s+(\d+(?:\.\d*)?)$`, frames split on ';') and speedscope's folded-stacks importer
// (`^(.*) (\d+)$`) read them. Numbers come from training_run.h.
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/trace_builder.h"
#include "tests/unit/analyzer/training_run.h"

namespace cumemtrace::analyzer::test {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// flamegraph.pl's reading of one input: stack -> samples (it sums repeated stacks), and lines it skipped.
struct Flame {
  std::map<std::string, uint64_t> stacks;
  int ignored = 0;
};

Flame ParseLikeFlamegraphPl(const std::string& text) {
  Flame f;
  const std::regex line_re(R"(^(.*)\s+(\d+(?:\.\d*)?)$)");
  const std::regex speedscope_re(R"(^(.*) (\d+)$)");
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::smatch m;
    const std::string l(line);
    if (!std::regex_match(l, m, line_re) || !std::regex_match(l, speedscope_re)) {
      ++f.ignored;
      continue;
    }
    f.stacks[m[1].str()] += std::stoull(m[2].str());
  }
  return f;
}

class Exports : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { b_ = new std::string(WriteTrainingRun("export_b.pb", true)); }
  static std::string* b_;
};
std::string* Exports::b_ = nullptr;

TEST_F(Exports, FoldedPeakParsesAsFlamegraphInput) {
  ToolResult r = Tool({"folded", *b_});
  ASSERT_EQ(r.code, 0) << r.err;
  const Flame f = ParseLikeFlamegraphPl(r.out);
  EXPECT_EQ(f.ignored, 0) << r.out;
  // The peak of device 0's total (2400 B at the last step), root first, one line per stack.
  const std::map<std::string, uint64_t> want = {
      {"device 0 total;<module> (train.py:99);keep_loss (train.py:42);cudaMalloc [libcudart.so.13]", 1000},
      {"device 0 total;<module> (train.py:99);load_model (model.py:5);cudaMalloc [libcudart.so.13]", 900},
      {"device 0 total;<module> (train.py:99);train_step (train.py:10);cudaMalloc [libcudart.so.13]", 500},
  };
  EXPECT_EQ(f.stacks, want) << r.out;
  uint64_t total = 0;
  for (const auto& [stack, bytes] : f.stacks) {
    total += bytes;
    const std::vector<std::string> frames = absl::StrSplit(stack, ';');
    EXPECT_EQ(frames.size(), 4u);
  }
  EXPECT_EQ(total, 2400u);
}

TEST_F(Exports, FoldedLeaksToAFile) {
  const std::string out = ::testing::TempDir() + "/export_leaks.folded";
  ToolResult r = Tool({"folded", *b_, "--leaks", "-o", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const Flame f = ParseLikeFlamegraphPl(ReadFile(out));
  EXPECT_EQ(f.ignored, 0);
  ASSERT_EQ(f.stacks.size(), 2u);
  EXPECT_EQ(f.stacks.begin()->first,
            "device 0 device;<module> (train.py:99);keep_loss (train.py:42);cudaMalloc [libcudart.so.13]");
  EXPECT_EQ(f.stacks.begin()->second, 1000u);
  std::remove(out.c_str());
  // Scoped to a device with nothing: empty, still a valid input.
  r = Tool({"folded", *b_, "--device", "1"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
