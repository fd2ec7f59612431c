// `whatif` on the real H100 traces of examples/: the allocator replay under the recorded settings must reproduce
// the recorded run exactly (every segment the allocator made or released, every block's address, the OOM at the
// same request: the trace's own allocator events are the oracle), and its reserved peak must equal PyTorch's own
// reserved_bytes.all.peak in the truth file (tolerance zero).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "analyzer/model/analysis.h"
#include "analyzer/model/torch/allocator_whatif.h"
#include "tests/golden/golden_support.h"

namespace cumemtrace::analyzer::golden {
namespace {

struct Case {
  const char* trace;
  const char* truth;
  uint64_t requests;  // torch.alloc + torch.oom events of the trace
};

class WhatIfRecorded : public ::testing::TestWithParam<Case> {};

// The last reserved_bytes.all.peak the workload read from PyTorch: its final memory_stats, else its last
// checkpoint.
uint64_t TruthReservedPeak(const JsonValue& truth) {
  if (truth.has("memory_stats")) return truth["memory_stats"]["reserved_bytes.all.peak"].uinteger();
  const JsonValue& checkpoints = truth["checkpoints"];
  return checkpoints[checkpoints.size() - 1]["stats"]["reserved_bytes.all.peak"].uinteger();
}

TEST_P(WhatIfRecorded, ReplayReproducesTheRecordedAllocator) {
  const Case& c = GetParam();
  const JsonValue report = Report({"whatif", Example(c.trace)});
  const JsonValue& fidelity = report["fidelity"];
  EXPECT_TRUE(fidelity["exact"].boolean()) << fidelity["divergence"].str();
  EXPECT_EQ(fidelity["requests"].uinteger(), c.requests);
  EXPECT_EQ(report["recorded"]["requests"].uinteger(), c.requests);
  EXPECT_TRUE(report["capacity_model_agrees"].boolean());
  const JsonValue truth = Truth(c.truth);
  if (report["recorded"]["oom"].boolean()) {
    // The replay fails at the request the recorded run failed at.
    EXPECT_EQ(report["claim"].str(), "oom");
    EXPECT_EQ(report["replay"]["failure"]["seq"].uinteger(), report["recorded"]["oom_seq"].uinteger());
    EXPECT_EQ(report["replay"]["failure"]["size"].uinteger(),
              truth.has("request") ? truth["request"].uinteger() : truth["output_bytes"].uinteger());
  } else {
    EXPECT_EQ(report["claim"].str(), "runs_through");
    EXPECT_FALSE(report["oom"].boolean());
    EXPECT_EQ(report["reserved_peak"].uinteger(), TruthReservedPeak(truth));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Examples, WhatIfRecorded,
    ::testing::Values(Case{"gpt2_blocks_h100.pb", "gpt2_blocks_h100_truth.json", 3579},
                      Case{"gpt2_blocks_expandable_h100.pb", "gpt2_blocks_expandable_h100_truth.json", 3579},
                      Case{"story_leak_blocks_h100.pb", "story_leak_blocks_h100_truth.json", 127},
                      Case{"story_oom_blocks_h100.pb", "story_oom_blocks_h100_truth.json", 91},
                      Case{"frag_oom_h100.pb", "frag_oom_h100_truth.json", 22},
                      Case{"gc_threshold_h100.pb", "gc_threshold_h100_truth.json", 124},
                      Case{"gc_threshold_conf_h100.pb", "gc_threshold_conf_h100_truth.json", 124}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = info.param.trace;
      return name.substr(0, name.find('.'));
    });

// Traces whose programs were rerun on the GPU with each setting (tests/gpu/whatif_check.sh): the truth's "whatif"
// entries are the reruns' outcomes, and `whatif --set` must predict each: OOM or not, and the reserved peak
// (PyTorch's max_memory_reserved) to the byte when it ran through.
class WhatIfReruns : public ::testing::TestWithParam<const char*> {};

TEST_P(WhatIfReruns, ReplayPredictsEachRerun) {
  const std::string name = GetParam();
  const JsonValue truth = Truth(name + "_truth.json");
  ASSERT_GT(truth["whatif"].size(), 0u);
  for (const JsonValue& entry : truth["whatif"].array()) {
    std::vector<std::string> args = {"whatif", Example(name + ".pb")};
    if (entry.has("set")) args.insert(args.end(), {"--set", entry["set"].str()});
    if (entry.has("capacity_bytes")) {
      args.insert(args.end(), {"--capacity", std::to_string(entry["capacity_bytes"].uinteger())});
    }
    if (entry.has("without_outside")) args.push_back("--without-outside");
    const JsonValue report = Report(args);
    SCOPED_TRACE(args[2]);
    EXPECT_TRUE(report["fidelity"]["exact"].boolean()) << report["fidelity"]["divergence"].str();
    ASSERT_EQ(report["oom"].type(), JsonValue::Type::kBool) << report["claim"].str();
    EXPECT_EQ(report["oom"].boolean(), entry["oom"].boolean());
    if (!entry["oom"].boolean()) {
      EXPECT_EQ(report["reserved_peak"].uinteger(), entry["reserved_peak"].uinteger());
    }
  }
  // And with no option, the recorded outcome.
  const JsonValue recorded = Report({"whatif", Example(name + ".pb")});
  EXPECT_EQ(recorded["oom"].boolean(), truth["oom"].boolean());
}

INSTANTIATE_TEST_SUITE_P(Examples, WhatIfReruns,
                         ::testing::Values("whatif_holes_h100", "whatif_live_h100", "whatif_steps_alone_h100",
                                           "whatif_steps_other_h100", "gc_threshold_h100", "gc_threshold_conf_h100"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// A second process held all but 2.5 GiB of the card (the truth's other_bytes): the verdict names the memory outside
// PyTorch, and the replay checked for `oom` says the requests fit without it.
TEST(WhatIfOom, AnotherProcessIsTheCauseAndTheReplayShowsIt) {
  const JsonValue truth = Truth("whatif_steps_other_h100_truth.json");
  const JsonValue oom = Report({"oom", Example("whatif_steps_other_h100.pb")});
  ASSERT_EQ(oom["torch_ooms"].size(), 1u);
  const JsonValue& v = oom["torch_ooms"][0]["verdict"];
  EXPECT_EQ(v["cause"].str(), "outside_pytorch");
  EXPECT_GE(v["outside_untraced_bytes"].uinteger(), truth["other_bytes"].uinteger());
  bool without = false;
  for (const JsonValue& c : oom["replay_checks"].array()) {
    if (!c["without_outside"].boolean()) continue;
    without = true;
    EXPECT_FALSE(c["oom"].boolean());
    EXPECT_EQ(c["reserved_peak"].uinteger(), truth["whatif"][0]["reserved_peak"].uinteger());
  }
  EXPECT_TRUE(without);
}

// The default report leads with the answer and fits one screen (60 lines), on every real trace shipped. The OOM
// traces (their truths hold PyTorch's OOM; leaky's program plants a 2^50-byte request) open with "Out of memory:" right
// after the process lines.
TEST(DefaultReport, LeadsWithTheAnswerInOneScreen) {
  const std::vector<std::pair<std::string, bool>> examples = {
      {"story_oom_blocks_h100", true},  {"story_oom_h200", true},          {"frag_oom_h100", true},
      {"whatif_holes_h100", true},      {"whatif_live_h100", true},        {"whatif_steps_other_h100", true},
      {"story_leak_blocks_h100", false}, {"story_leak_h200", false},       {"gpt2_blocks_h100", false},
      {"gpt2_blocks_expandable_h100", false}, {"dataloader_pin_h200", false}, {"ddp_rank0_h200", false},
      {"ddp_rank1_h200", false},        {"nvtx_phases_h100", false},        {"leaky_h200", true},  // its planted cudaMalloc(2^50)
                  {"torch_train_pinned_h200", false},
      {"whatif_steps_alone_h100", false}};
  for (const auto& [name, oom] : examples) {
    const test::ToolResult r = test::Tool({Example(name + ".pb")});
    ASSERT_EQ(r.code, kExitOk) << name << ": " << r.err;
    std::vector<std::string> lines;
    std::stringstream text(r.out);
    for (std::string line; std::getline(text, line);) lines.push_back(line);
    EXPECT_LE(lines.size(), 60u) << name;
    // The process block ends at the first empty line; the answer comes next.
    size_t first = 0;
    while (first < lines.size() && !lines[first].empty()) ++first;
    ASSERT_LT(first + 1, lines.size()) << name;
    EXPECT_EQ(lines[first + 1].rfind("Out of memory:", 0) == 0, oom) << name << ": " << lines[first + 1];
  }
}

// story_oom's first cudaMalloc refusal was followed by PyTorch releasing its cache and being served: PyTorch counts
// it among its retries (num_alloc_retries) but not among its OOMs; it is not a failure.
TEST(DefaultReport, RecoveredDriverFailuresAreNotFailures) {
  const JsonValue stats = Truth("story_oom_blocks_h100_truth.json")["memory_stats"];
  const JsonValue oom = Report({"oom", Example("story_oom_blocks_h100.pb")});
  uint64_t recovered = 0;
  for (const JsonValue& e : oom["ooms"].array()) recovered += e["recovered"].boolean() ? 1 : 0;
  EXPECT_EQ(recovered, stats["num_alloc_retries"].uinteger() - stats["num_ooms"].uinteger());
  EXPECT_EQ(oom["recovered_count"].uinteger(), recovered);
  const test::ToolResult text = test::Tool({Example("story_oom_blocks_h100.pb")});
  EXPECT_NE(text.out.find("Failed allocations: 2 (and 1 that PyTorch's allocator recovered from"), std::string::npos)
      << text.out;
  EXPECT_EQ(text.out.find("Leaks: 78"), std::string::npos) << text.out;  // the cache is not a leak
}

// NVTX phases on a fresh H200 run: the reserved peak of each phase (the torch_reserved series of `peak --json`) is
// PyTorch's max_memory_reserved() of the phase. Handing in-order batches straight to the model (before the metadata
// read ahead of them reached it) gave both 34 MiB low on this trace, and not on nvtx_phases_h100.
TEST(Phases, ReservedPeakPerPhaseOfAnH200Run) {
  const JsonValue truth = Truth("nvtx_phases_h200_truth.json");
  const JsonValue peak = Report({"peak", Example("nvtx_phases_h200.pb")});
  int found = 0;
  for (const JsonValue& phase : peak["phases"].array()) {
    for (const JsonValue& p : phase["peaks"].array()) {
      if (p["device"].integer() != 0 || p["kind"].str() != "torch_reserved") continue;
      ++found;
      EXPECT_EQ(p["peak_bytes"].uinteger(), truth["phases"][phase["name"].str()]["max_memory_reserved"].uinteger())
          << phase["name"].str();
    }
  }
  EXPECT_EQ(found, 2);
}

// NVTX phases at tensor level: `peak --phase NAME --json` gives PyTorch's own allocated and requested peaks of the
// phase (its truth read them after reset_peak_memory_stats() at the phase's start), and reserved too; the default
// report says that validation peaked above training.
TEST(Phases, TensorPeaksPerPhaseArePyTorchsOwn) {
  const JsonValue truth = Truth("nvtx_phases_h100_truth.json");
  for (const std::string phase : {"train", "validate"}) {
    const JsonValue peak = Report({"peak", Example("nvtx_phases_h100.pb"), "--phase", phase});
    const JsonValue& d = peak["allocator"]["devices"][0];
    EXPECT_EQ(d["phase"].str(), phase);
    EXPECT_EQ(d["allocated_peak_bytes"].uinteger(), truth["phase_peaks"][phase]["allocated"].uinteger()) << phase;
    EXPECT_EQ(d["requested_peak_bytes"].uinteger(), truth["phase_peaks"][phase]["requested"].uinteger()) << phase;
    EXPECT_EQ(d["reserved_peak_bytes"].uinteger(), truth["phases"][phase]["max_memory_reserved"].uinteger())
        << phase;
  }
  const test::ToolResult text = test::Tool({Example("nvtx_phases_h100.pb")});
  EXPECT_NE(text.out.find("Phase validate peaks above train:"), std::string::npos) << text.out;
}

// Phases found without NVTX ranges (training and validation told apart by backward passes): `peak --phase NAME`
// gives PyTorch's own peaks of each, read after reset_peak_memory_stats() at the start of every stretch (the larger
// of a phase's two stretches), and the default report says that validation peaked above training.
TEST(Phases, DetectedPhasesHavePyTorchsOwnPeaks) {
  const JsonValue truth = Truth("train_validate_h100_truth.json");
  const JsonValue all = Report({"peak", Example("train_validate_h100.pb")});
  EXPECT_TRUE(all["phases_detected"].boolean());
  std::vector<std::string> ranges;
  for (const JsonValue& r : all["phase_ranges"].array()) ranges.push_back(r["name"].str());
  EXPECT_EQ(ranges, (std::vector<std::string>{"train", "validate", "train", "validate"}));
  for (const std::string phase : {"train", "validate"}) {
    const JsonValue peak = Report({"peak", Example("train_validate_h100.pb"), "--phase", phase});
    const JsonValue& d = peak["allocator"]["devices"][0];
    EXPECT_EQ(d["allocated_peak_bytes"].uinteger(), truth["phase_peaks"][phase]["allocated"].uinteger()) << phase;
    EXPECT_EQ(d["requested_peak_bytes"].uinteger(), truth["phase_peaks"][phase]["requested"].uinteger()) << phase;
    EXPECT_EQ(d["reserved_peak_bytes"].uinteger(), truth["phase_peaks"][phase]["reserved"].uinteger()) << phase;
  }
  // The first line after the trace's description (no OOM to explain first).
  const test::ToolResult text = test::Tool({Example("train_validate_h100.pb")});
  const size_t answer = text.out.find("\n\n") + 2;
  EXPECT_EQ(text.out.find("Phase validate peaks above train (phases found from backward passes"), answer)
      << text.out;
}

// Phases found from backward passes need a second read of the trace; the progress line names it. A trace with
// NVTX ranges, or without validation, is read once.
TEST(Phases, DetectedPhasesCostASecondReadThatTheProgressLineNames) {
  std::vector<std::string> stages;
  AnalyzeOptions options;
  options.progress_stage = [&stages](const std::string& stage) { stages.push_back(stage); };
  absl::StatusOr<std::unique_ptr<Analysis>> a = Analyze(Example("train_validate_h100.pb"), options);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(stages, (std::vector<std::string>{"reading it again with the training and validation found"}));
  EXPECT_TRUE((*a)->phases.detected);
  stages.clear();
  for (const char* other : {"nvtx_phases_h100.pb", "gpt2_blocks_h100.pb"}) {
    a = Analyze(Example(other), options);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_FALSE((*a)->phases.detected) << other;
  }
  EXPECT_TRUE(stages.empty());
}

// A replay made by the way holds a bounded number of allocator events: past it, the input is refused with a reason
// (the default report then says to run whatif), never read into unbounded memory.
TEST(WhatIfLimits, ReplayInputIsBounded) {
  // gpt2_blocks: 3579 allocations, 3576 frees and 88 segments of device 0 (plus the events of other kinds).
  const absl::StatusOr<ReplayInputPtr> small = ReadReplayInput(Example("gpt2_blocks_h100.pb"), 1000);
  ASSERT_FALSE(small.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(small.status())) << small.status();
  EXPECT_NE(small.status().message().find("cumem-analyze whatif"), absl::string_view::npos);
  EXPECT_TRUE(ReadReplayInput(Example("gpt2_blocks_h100.pb"), 100000).ok());
}

// The HTML page's block map at frag_oom's OOM: PyTorch's own list of active blocks before the failing request
// (the truth's checkpoint, from torch.cuda.memory._snapshot()) are the map's allocated blocks, and the holes between
// them are free blocks none of which holds the 500 MiB asked for.
TEST(HtmlBlockMap, AllocatedBlocksArePyTorchsActiveBlocks) {
  const std::string out = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_frag.html";
  const test::ToolResult r = test::Tool({"html", Example("frag_oom_h100.pb"), "-o", out});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  std::ifstream in(out);
  std::stringstream page;
  page << in.rdbuf();
  std::remove(out.c_str());
  const std::string html = page.str();
  const std::string open = "<script type=\"application/json\" id=\"cumem-data\">";
  const size_t start = html.find(open);
  ASSERT_NE(start, std::string::npos);
  const size_t end = html.find("</script>", start);
  const JsonValue data = ParseOrFail(html.substr(start + open.size(), end - start - open.size()), "page data");
  const JsonValue& map = data["allocator"];
  const JsonValue truth = Truth("frag_oom_h100_truth.json");
  EXPECT_EQ(map["request"].uinteger(), truth["request"].uinteger());
  std::vector<std::pair<uint64_t, uint64_t>> allocated;
  uint64_t largest_hole = 0;
  ASSERT_EQ(map["segments"].size(), 1u);  // one 2 GiB segment
  for (const JsonValue& b : map["segments"][0]["blocks"].array()) {
    if (b[2].integer() == 0) allocated.push_back({b[0].uinteger(), b[1].uinteger()});
    if (b[2].integer() == 2) largest_hole = std::max<uint64_t>(largest_hole, b[1].uinteger());
  }
  const JsonValue& active = truth["checkpoints"][0]["active_blocks"];
  ASSERT_EQ(allocated.size(), active.size());
  const uint64_t base = active[0][0].uinteger() - allocated[0].first;  // the segment's address
  for (size_t i = 0; i < allocated.size(); ++i) {
    EXPECT_EQ(base + allocated[i].first, active[i][0].uinteger()) << i;
    EXPECT_EQ(allocated[i].second, active[i][1].uinteger()) << i;
  }
  EXPECT_LT(largest_hole, truth["request"].uinteger());
}

// story_oom's OOM: PyTorch's message says how much of the card was free ("of which 166.19 MiB is free"); the
// replay's figure at the failing request (the card less reserved and outside memory) must say the same, to the
// message's rounding.
TEST(WhatIfOom, FreeOnTheCardIsPyTorchsOwn) {
  const JsonValue report = Report({"whatif", Example("story_oom_blocks_h100.pb")});
  const std::string message = Truth("story_oom_blocks_h100_truth.json")["oom"]["message"].str();
  const size_t at = message.find(" MiB is free");
  ASSERT_NE(at, std::string::npos) << message;
  const size_t start = message.rfind(' ', at - 1) + 1;
  const double free_mib = std::stod(message.substr(start, at - start));
  EXPECT_NEAR(report["free_at_failure"].uinteger() / double(1 << 20), free_mib, 0.005);
}

// frag_oom ran under torch.cuda.set_per_process_memory_fraction: PyTorch refused the request without asking the
// driver. The replay must see a cap, and bound it around what PyTorch's own message says was allowed.
TEST(WhatIfCap, BoundsContainTheAllowedMemoryOfPyTorchsMessage) {
  const JsonValue report = Report({"whatif", Example("frag_oom_h100.pb")});
  const JsonValue& cap = report["memory_cap"];
  ASSERT_EQ(cap.type(), JsonValue::Type::kObject);
  const std::string message = Truth("frag_oom_h100_truth.json")["message"].str();
  const size_t at = message.find(" GiB allowed");
  ASSERT_NE(at, std::string::npos) << message;
  const size_t start = message.rfind(' ', at - 1) + 1;
  const double allowed_gib = std::stod(message.substr(start, at - start));  // printed with two decimals
  const double low = cap["low"].uinteger() / double(1ull << 30), high = cap["high"].uinteger() / double(1ull << 30);
  EXPECT_LE(low, allowed_gib + 0.005);
  EXPECT_GE(high, allowed_gib - 0.005);
  EXPECT_LT(low, high);
}

// garbage_collection_threshold acts only under a per-process memory fraction (PyTorch ignores it otherwise): on a run
// with none, the what-if replays as the defaults do and says why; with a fraction named, the collections are made.
TEST(WhatIfGarbageCollection, WithoutAFractionTheThresholdChangesNothingAndTheReportSaysWhy) {
  const JsonValue plain = Report({"whatif", Example("gpt2_blocks_h100.pb")});
  const JsonValue asked =
      Report({"whatif", Example("gpt2_blocks_h100.pb"), "--set", "garbage_collection_threshold:0.6"});
  EXPECT_EQ(asked["claim"].str(), "runs_through");
  EXPECT_TRUE(asked["fidelity"]["exact"].boolean());
  EXPECT_EQ(asked["reserved_peak"].uinteger(), plain["reserved_peak"].uinteger());
  EXPECT_EQ(asked["whatif_memory_cap"].type(), JsonValue::Type::kNull);
  ASSERT_EQ(asked["notes"].array().size(), 1u);
  EXPECT_NE(asked["notes"][0].str().find("per_process_memory_fraction"), std::string::npos);
}

}  // namespace
}  // namespace cumemtrace::analyzer::golden
