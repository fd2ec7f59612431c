// The autograd diagnosis and the other processes on real H100 traces (examples/), against what the GPU showed:
// each graph-retention program was rerun with the change its truth names (tests/gpu/graph_retention_check.sh) and
// ran through where the traced run ran out of memory, so the report must name that change and that line; the other
// process's pid and memory are those of PyTorch's own OOM message (bytes within its 0.01 GiB rounding).
#include <cmath>
#include <string>

#include "tests/golden/golden_support.h"

namespace cumemtrace::analyzer::golden {
namespace {

// `cumem-analyze ARGS` (text): stdout; a failure if the tool does not exit 0.
std::string Text(const std::vector<std::string>& args) {
  test::ToolResult r = test::Tool(args);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  return r.out;
}

class GraphFix : public ::testing::TestWithParam<const char*> {};

TEST_P(GraphFix, TheOomNamesTheChangeThatTheRerunShowedWorks) {
  const std::string name = GetParam();
  const JsonValue truth = Truth(name + "_truth.json");
  // The oracle: traced and untraced the program ran out of memory; with the change it did not.
  ASSERT_TRUE(truth["oom"].boolean());
  ASSERT_TRUE(truth["untraced"]["oom"].boolean());
  ASSERT_FALSE(truth["with_fix"]["oom"].boolean());
  const std::string fix = truth["fix"].str();
  const std::string line = truth["fix_file"].str() + ":" + std::to_string(truth["fix_line"].uinteger());

  const JsonValue report = Report({"oom", Example(name + ".pb")});
  const JsonValue& oom = report["torch_ooms"][report["torch_ooms"].size() - 1];
  const JsonValue& autograd = oom["autograd"];
  EXPECT_TRUE(autograd["grad_mode_known"].boolean());
  EXPECT_EQ(autograd["fix"].str(), fix);
  const std::string file = autograd["where"]["file"].str();
  EXPECT_EQ(file.substr(file.rfind('/') + 1) + ":" + std::to_string(autograd["where"]["line"].uinteger()), line);
  // The tensors it is about are most of what was live at the OOM.
  EXPECT_GT(autograd["fix_bytes"].uinteger(), oom["verdict"]["allocated_bytes"].uinteger() / 2);

  const std::string text = Text({"oom", Example(name + ".pb")});
  const std::string change = fix == "no_grad" ? "`with torch.no_grad():`" : "`value.item()`";
  EXPECT_NE(text.find(change), std::string::npos) << text;
  EXPECT_NE(text.find(line), std::string::npos) << text;
  // The summary leads with the same sentence.
  const std::string summary = Text({"summary", Example(name + ".pb")});
  EXPECT_NE(summary.find(change), std::string::npos) << summary;
}

INSTANTIATE_TEST_SUITE_P(Examples, GraphFix, ::testing::Values("graph_no_grad_h100", "graph_item_h100"));

// Without an OOM: the evaluation loop of graph_no_grad_h100 for 40 batches fits, at a tensor peak PyTorch measured;
// rerun under torch.no_grad() its peak was lower. The summary leads with the change at that peak.
TEST(GraphFix, APeakTheGraphInflatedLeadsTheSummary) {
  const JsonValue truth = Truth("graph_no_grad_peak_h100_truth.json");
  ASSERT_FALSE(truth["oom"].boolean());
  ASSERT_LT(truth["with_fix"]["allocated_peak"].uinteger(), truth["allocated_peak"].uinteger());
  const JsonValue report = Report({"peak", Example("graph_no_grad_peak_h100.pb")});
  const JsonValue& device = report["allocator"]["devices"][0];
  EXPECT_EQ(device["allocated_peak_bytes"].uinteger(), truth["allocated_peak"].uinteger());
  const JsonValue& autograd = device["autograd"];
  EXPECT_EQ(autograd["fix"].str(), truth["fix"].str());
  EXPECT_EQ(autograd["where"]["line"].uinteger(), truth["fix_line"].uinteger());
  // The tensors it names are part of the peak.
  EXPECT_LE(autograd["fix_bytes"].uinteger(), truth["allocated_peak"].uinteger());
  const std::string summary = Text({"summary", Example("graph_no_grad_peak_h100.pb")});
  const size_t first = summary.find("Autograd:");
  ASSERT_NE(first, std::string::npos) << summary;
  EXPECT_LT(first, summary.find("Peak memory")) << summary;  // before the tables: the answer first
  EXPECT_NE(summary.find("graph_retention.py:56 in evaluate() in `with torch.no_grad():`"), std::string::npos)
      << summary;
}

// Traces without autograd's grad mode (captured before it was recorded) get no graph finding: never a guess.
TEST(GraphFix, TracesWithoutGradModeGetNone) {
  for (const char* name : {"story_oom_blocks_h100.pb", "frag_oom_h100.pb", "whatif_live_h100.pb"}) {
    const JsonValue report = Report({"oom", Example(name)});
    const JsonValue& oom = report["torch_ooms"][report["torch_ooms"].size() - 1];
    EXPECT_FALSE(oom["autograd"]["grad_mode_known"].boolean()) << name;
    EXPECT_TRUE(oom["autograd"]["fix"].is_null()) << name;
  }
}

// A training run's OOM-free peak is its own forward's activations, followed by a backward pass: no finding.
TEST(GraphFix, ATrainingPeakIsNotAFinding) {
  const JsonValue report = Report({"peak", Example("backward_gpt2_h100.pb")});
  const JsonValue& autograd = report["allocator"]["devices"][0]["autograd"];
  EXPECT_TRUE(autograd["grad_mode_known"].boolean());
  EXPECT_TRUE(autograd["fix"].is_null());
  EXPECT_GT(autograd["backward_passes"].uinteger(), 0u);
}

// The engine's tensors at GPT-2's allocated peak are named by their autograd node (issue 24's target: 95 % of the
// bytes).
TEST(BackwardNodes, GptTwosBackwardTensorsAreNamedByNode) {
  const JsonValue report = Report({"peak", Example("backward_gpt2_h100.pb")});
  const JsonValue& backward = report["allocator"]["devices"][0]["autograd"]["backward"];
  ASSERT_GT(backward["bytes"].uinteger(), 0u);
  EXPECT_GE(backward["named_bytes"].uinteger() * 100, backward["bytes"].uinteger() * 95);
  bool mm = false;
  for (const JsonValue& n : backward["nodes"].array()) mm |= !n["node"].is_null() && n["node"].str() == "MmBackward0";
  EXPECT_TRUE(mm);
  // Their groups (no user frame on the engine's thread) are keyed by the node, not by the allocator's frame.
  const std::string text = Text({"peak", Example("backward_gpt2_h100.pb")});
  EXPECT_NE(text.find("no user frame; in torch::autograd::generated::MmBackward0::apply("), std::string::npos) << text;
  EXPECT_EQ(text.find("no user frame; in c10::cuda::CUDACachingAllocator"), std::string::npos) << text;
}

// Beside another process: the OOM names it with the memory PyTorch's own message gave it.
TEST(OtherProcesses, TheOomNamesTheProcessPyTorchsMessageNamed) {
  const JsonValue truth = Truth("other_process_h100_truth.json");
  ASSERT_EQ(truth["other_processes"].size(), 1u);
  const JsonValue& expected = truth["other_processes"][0];
  const JsonValue report = Report({"oom", Example("other_process_h100.pb")});
  const JsonValue& oom = report["torch_ooms"][report["torch_ooms"].size() - 1];
  EXPECT_EQ(oom["verdict"]["cause"].str(), "outside_pytorch");
  ASSERT_EQ(oom["other_processes"].size(), 1u);
  const JsonValue& got = oom["other_processes"][0];
  EXPECT_EQ(got["pid"].uinteger(), expected["pid"].uinteger());
  // PyTorch prints GiB with two decimals: the bytes agree to half of 0.01 GiB.
  const double gib = static_cast<double>(got["bytes"].uinteger()) / (1ull << 30);
  EXPECT_NEAR(gib, static_cast<double>(expected["bytes"].uinteger()) / (1ull << 30), 0.005);
  EXPECT_EQ(oom["processes_pids"].str(), "same");
  const std::string text = Text({"oom", Example("other_process_h100.pb")});
  EXPECT_NE(text.find("pid " + std::to_string(expected["pid"].uinteger())), std::string::npos) << text;
}

}  // namespace
}  // namespace cumemtrace::analyzer::golden
