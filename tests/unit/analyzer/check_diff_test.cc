// check (the CI gate) and diff (two runs compared), end to end through RunCli: each bound passes at its exact
// value and fails one byte below, with the one-line reason and the exit status a CI script reads; diff matches
// groups across two traces written "on two machines" (other addresses, stack ids and checkout folders) and puts
// the planted leak first. Numbers are worked out in scenario.cc and training_run.h.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "analyzer/byte_size.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/json_value.h"
#include "tests/unit/analyzer/scenario.h"
#include "tests/unit/analyzer/training_run.h"

namespace cumemtrace::analyzer::test {
namespace {

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

TEST(ByteSize, ParsesUnits) {
  uint64_t b = 0;
  ASSERT_TRUE(ParseByteSize("--max-peak", "8GiB", &b).ok());
  EXPECT_EQ(b, uint64_t{8} << 30);
  ASSERT_TRUE(ParseByteSize("--max-peak", "1.5k", &b).ok());
  EXPECT_EQ(b, 1536u);
  ASSERT_TRUE(ParseByteSize("--max-peak", "2GB", &b).ok());
  EXPECT_EQ(b, 2'000'000'000u);
  ASSERT_TRUE(ParseByteSize("--max-peak", "18446744073709551615", &b).ok());
  EXPECT_EQ(b, UINT64_MAX);
  ASSERT_TRUE(ParseByteSize("--max-leak", "512 MiB", &b).ok());
  EXPECT_EQ(b, uint64_t{512} << 20);
  EXPECT_EQ(ParseByteSize("--max-peak", "lots", &b).message(),
            "--max-peak takes a size such as 8GiB, 512MiB or 1000000, not 'lots'");
  EXPECT_FALSE(ParseByteSize("--max-peak", "8XB", &b).ok());
  EXPECT_FALSE(ParseByteSize("--max-peak", "99999999999TiB", &b).ok());
}

class Check : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { path_ = new std::string(WriteScenario("check_scenario.pb")); }
  static const std::string& path() { return *path_; }
  static std::string* path_;
};
std::string* Check::path_ = nullptr;

TEST_F(Check, PeakOfTheDeviceTotalByDefault) {
  ToolResult r = Tool({"check", path(), "--max-peak", "1350"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "check passed: peak 1.3 KiB <= 1.3 KiB (1 timeline)\n");
  r = Tool({"check", path(), "--max-peak=1349"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StartsWith(r.out, "check failed: peak of device 0 total memory 1.3 KiB (1350 B) at 0.007 s is "
                                      "over --max-peak 1.3 KiB; largest: "))
      << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line";
}

TEST_F(Check, KindAndDeviceScopeThePeak) {
  EXPECT_EQ(Tool({"check", path(), "--kind", "pinned_host", "--max-peak", "12288"}).code, 0);
  ToolResult r = Tool({"check", path(), "--kind", "pinned_host", "--max-peak", "12287"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("peak of host pinned_host memory 12.0 KiB (12288 B)"), std::string::npos) << r.out;
  EXPECT_EQ(Tool({"check", path(), "--kind", "device", "--max-peak", "650"}).code, 0);
  EXPECT_EQ(Tool({"check", path(), "--kind", "device", "--max-peak", "649"}).code, 1);
  EXPECT_EQ(Tool({"check", path(), "--kind", "pool", "--device", "0", "--max-peak", "999"}).code, 1);
  // No such device: nothing to check, nothing broken.
  r = Tool({"check", path(), "--device", "3", "--max-peak", "1"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "check passed: peak 0 B <= 1 B (0 timelines)\n");
}

TEST_F(Check, LeakBound) {
  // Live at the end: device 350 + pinned_host 8192 (the 1 GiB address reservation is not memory).
  EXPECT_EQ(Tool({"check", path(), "--max-leak", "8542"}).code, 0);
  ToolResult r = Tool({"check", path(), "--max-leak", "8541"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StartsWith(r.out, "check failed: 8.3 KiB (8542 B) in 3 allocations still live at the end is "
                                      "over --max-leak 8.3 KiB; largest: "))
      << r.out;
  EXPECT_EQ(Tool({"check", path(), "--device", "0", "--max-leak", "350"}).code, 0);
  EXPECT_EQ(Tool({"check", path(), "--device", "0", "--max-leak", "349"}).code, 1);
}

TEST_F(Check, NoOom) {
  ToolResult r = Tool({"check", path(), "--no-oom"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StartsWith(r.out, "check failed: 1 failed allocation (--no-oom); first: 1.0 TiB by cudaMalloc "
                                      "on device 0 at 0.009 s (CUDA_ERROR_OUT_OF_MEMORY)"))
      << r.out;
  EXPECT_EQ(Tool({"check", path(), "--no-oom", "--device", "host"}).code, 0);
  r = Tool({"check", path(), "--max-peak", "8GiB", "--max-leak", "1GiB", "--device", "host", "--no-oom"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "check passed: peak 0 B <= 8.0 GiB (0 timelines); live at the end 8.0 KiB <= 1.0 GiB; no failed "
                   "allocation\n");
}

TEST_F(Check, UsageAndBadInputExit2) {
  ToolResult r = Tool({"check", path()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "cumem-analyze: check needs at least one of --max-peak SIZE, --max-leak SIZE, --no-oom (see "
                   "cumem-analyze --help)\n");
  EXPECT_EQ(Tool({"check", path(), "--max-peak", "big"}).code, 2);
  EXPECT_EQ(Tool({"check", path(), "--kind", "gpu", "--max-peak", "1"}).code, 2);
  EXPECT_EQ(Tool({"peak", path(), "--max-peak", "1"}).code, 2);
  const std::string empty = WriteTempFile("check_empty.pb", "");
  r = Tool({"check", empty, "--no-oom"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "cumem-analyze: " + empty + ": empty file, not a trace\n");
  EXPECT_EQ(r.out, "");
}

class Diff : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    a_ = new std::string(WriteTrainingRun("diff_a.pb", false));
    b_ = new std::string(WriteTrainingRun("diff_b.pb", true));
  }
  static std::string* a_;
  static std::string* b_;
};
std::string* Diff::a_ = nullptr;
std::string* Diff::b_ = nullptr;

TEST_F(Diff, PlantedLeakComesFirstInJson) {
  ToolResult r = Tool({"diff", *a_, *b_, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  JsonValue j = Json(r);
  EXPECT_EQ(j["command"].str(), "diff");
  // Peaks: device 0 device and total, A 1500, B 2400.
  ASSERT_EQ(j["peaks"].size(), 2u);
  EXPECT_EQ(j["peaks"][0]["kind"].str(), "device");
  EXPECT_EQ(j["peaks"][0]["a_bytes"].integer(), 1500);
  EXPECT_EQ(j["peaks"][0]["b_bytes"].integer(), 2400);
  EXPECT_EQ(j["peaks"][0]["change_bytes"].integer(), 900);
  ASSERT_EQ(j["leak_totals"].size(), 1u);
  EXPECT_EQ(j["leak_totals"][0]["change_bytes"].integer(), 900);  // +1000 leak, -100 model

  // Live at the end: the leaking line first (+1000), then the model's shrink (-100), matched across machines.
  ASSERT_EQ(j["leak_groups"].size(), 2u);
  const JsonValue& leak = j["leak_groups"][0];
  EXPECT_EQ(leak["change_bytes"].integer(), 1000);
  EXPECT_EQ(leak["a_bytes"].integer(), 0);
  EXPECT_EQ(leak["b_count"].integer(), 10);
  EXPECT_EQ(leak["user_frame"]["function"].str(), "keep_loss");
  EXPECT_EQ(leak["user_frame"]["line"].integer(), 42);
  EXPECT_EQ(leak["identity"].str(), "py|keep_loss|train.py|42");
  const JsonValue& model = j["leak_groups"][1];
  EXPECT_EQ(model["identity"].str(), "py|load_model|model.py|5");
  EXPECT_EQ(model["a_bytes"].integer(), 1000);
  EXPECT_EQ(model["b_bytes"].integer(), 900);
  EXPECT_EQ(model["change_bytes"].integer(), -100);
  EXPECT_EQ(j["leak_groups_changed"].integer(), 2);

  // At the peak of the device total: keep_loss +1000 first too; train_step unchanged (500 both) is left out.
  ASSERT_GE(j["peak_groups"].size(), 1u);
  EXPECT_EQ(j["peak_groups"][0]["identity"].str(), "py|keep_loss|train.py|42");
  for (const JsonValue& g : j["peak_groups"].array()) EXPECT_NE(g["identity"].str(), "py|train_step|train.py|10");
}

TEST_F(Diff, TextNamesTheLeakingLineFirst) {
  ToolResult r = Tool({"diff", *a_, *b_});
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t section = r.out.find("live at the end by group, largest change first (2 changed)\n");
  ASSERT_NE(section, std::string::npos) << r.out;
  const std::string first = FirstLine(r.out.substr(section + 59));
  EXPECT_NE(first.find("+1000 B"), std::string::npos) << first;
  EXPECT_NE(first.find("train.py:42 keep_loss"), std::string::npos) << first;
}

TEST_F(Diff, SameTraceHasNoChangeAndReversedShrinks) {
  ToolResult r = Tool({"diff", *a_, *a_, "--json"});
  ASSERT_EQ(r.code, 0);
  JsonValue j = Json(r);
  EXPECT_EQ(j["leak_groups"].size(), 0u);
  EXPECT_EQ(j["peak_groups"].size(), 0u);
  r = Tool({"diff", *b_, *a_, "--json", "--group-by", "stack"});
  ASSERT_EQ(r.code, 0);
  j = Json(r);
  EXPECT_EQ(j["leak_groups"][0]["change_bytes"].integer(), -1000);
  EXPECT_EQ(j["leak_groups"][0]["stack_in"].str(), "a");
}

TEST_F(Diff, Usage) {
  EXPECT_EQ(Tool({"diff", *a_}).code, 2);
  EXPECT_EQ(Tool({"diff", *a_, *b_, *b_}).code, 2);
  const std::string empty = WriteTempFile("diff_empty.pb", "");
  EXPECT_EQ(Tool({"diff", *a_, empty}).code, 2);
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
