// The PyTorch stories traced on 2x NVIDIA H200 (examples/README.md says how each was made): a validation loop that runs
// out of memory, a loop that leaks every step's loss, a DataLoader pinning batches, and DDP on two GPUs. Beside each
// trace lies the truth JSON the workload wrote on the GPU machine (tests/gpu/workloads/*.py): PyTorch's own counters
// and the script's marked lines. Every expected figure here is read from that JSON, never copied from the analyzer's
// output, and the reports come from cumem-analyze itself (RunCli, in-process) with its defaults, as a user runs it; the
// DDP allocator peak uses the library with one group per stack, as the existing golden test does.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "analyzer/commands/run_cli.h"
#include "analyzer/model/analysis.h"
#include "analyzer/model/stacks/frame_resolver.h"
#include "gtest/gtest.h"
#include "proto/format.h"
#include "tests/golden/golden_support.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/json_value.h"

namespace cumemtrace::analyzer {
namespace {

using test::JsonValue;

using golden::Example;
using golden::ParseOrFail;
using golden::Report;
using golden::Truth;

// A positive integer of the truth (a missing or zero figure must not make a relation pass vacuously).
uint64_t Positive(const JsonValue& v, const std::string& what) {
  EXPECT_EQ(v.type(), JsonValue::Type::kNumber) << what << " is missing from the truth";
  EXPECT_GT(v.integer(), 0) << what;
  return v.uinteger();
}

std::string BasenameOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool IsMemoryKind(const std::string& kind) {
  return kind == "device" || kind == "pinned_host" || kind == "registered_host" || kind == "managed" ||
         kind == "pool" || kind == "vmm_physical";
}

// Values never fall and end above where they started.
bool Rising(const std::vector<uint64_t>& values) {
  if (values.size() < 2) return false;
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] < values[i - 1]) return false;
  }
  return values.back() > values.front();
}

TEST(GoldenStories, OomFirstFailureIsTheValidationLine) {
  const JsonValue truth = Truth("story_oom_h200_truth.json");
  ASSERT_FALSE(truth["oom"].is_null()) << "the workload saw no OutOfMemoryError";
  const uint64_t output_bytes = Positive(truth["output_bytes"], "output_bytes");
  const uint64_t validation_line = Positive(truth["validation_line"], "validation_line");
  const uint64_t reserved_before = Positive(truth["last_reserved_before_oom"], "last_reserved_before_oom");
  const std::string script = truth["script"]["basename"].str();
  ASSERT_EQ(script, "story_oom.py");

  const JsonValue doc = Report({"oom", Example("story_oom_h200.pb")});
  EXPECT_EQ(doc["group_by"].str(), "user");  // the tool's default grouping
  ASSERT_GE(doc["ooms"].size(), 1u);
  const JsonValue& first = doc["ooms"][0];
  // The request that failed is one validation output: PyTorch asked cudaMalloc for exactly its bytes.
  EXPECT_EQ(first["requested_bytes"].uinteger(), output_bytes);
  EXPECT_EQ(first["error"].str(), "CUDA_ERROR_OUT_OF_MEMORY");
  // Who asked: the script's own validation line (`ROW-MARK: validation-output`), a Python frame.
  const JsonValue& user = first["user_frame"];
  EXPECT_EQ(user["kind"].str(), "python");
  EXPECT_EQ(BasenameOf(user["file"].str()), script);
  EXPECT_EQ(user["line"].uinteger(), validation_line);
  // Live at the failure: at least what PyTorch had reserved after the last output it kept.
  EXPECT_GE(first["live_bytes"].uinteger(), reserved_before);
}

TEST(GoldenStories, LeakTopGroupIsTheLoopLineAndGrows) {
  const JsonValue truth = Truth("story_leak_h200_truth.json");
  const std::set<uint64_t> lines = {Positive(truth["forward_line"], "forward_line"),
                                    Positive(truth["append_line"], "append_line")};
  const std::string script = truth["script"]["basename"].str();
  ASSERT_EQ(script, "story_leak.py");
  // PyTorch's counters after each step: memory_allocated rises (the oracle of "it leaks"), and what the caching
  // allocator reserved during the loop was reserved by the forward line, the loop's only allocating line.
  std::vector<uint64_t> allocated;
  uint64_t reserved_before = 0, reserved_after = 0;
  for (const JsonValue& s : truth["steps"].array()) {
    if (s["step"].integer() < 0) {
      reserved_before = s["memory_reserved"].uinteger();
      continue;
    }
    allocated.push_back(s["memory_allocated"].uinteger());
    reserved_after = s["memory_reserved"].uinteger();
  }
  ASSERT_EQ(allocated.size(), Positive(truth["losses_kept"], "losses_kept"));
  ASSERT_TRUE(Rising(allocated));
  ASSERT_GT(reserved_after, reserved_before);

  const JsonValue doc = Report({"leaks", Example("story_leak_h200.pb")});
  EXPECT_EQ(doc["group_by"].str(), "user");
  const JsonValue* top = nullptr;
  for (const JsonValue& g : doc["leaks"].array()) {
    if (!IsMemoryKind(g["kind"].str())) continue;
    if (top == nullptr || g["bytes"].uinteger() > (*top)["bytes"].uinteger()) top = &g;
  }
  ASSERT_NE(top, nullptr);
  const JsonValue& user = (*top)["user_frame"];
  EXPECT_EQ(user["kind"].str(), "python");
  EXPECT_EQ(BasenameOf(user["file"].str()), script);
  EXPECT_TRUE(lines.count(user["line"].uinteger())) << "user frame line " << user["line"].uinteger();
  std::vector<uint64_t> growth;
  for (const JsonValue& v : (*top)["growth"].array()) growth.push_back(v.uinteger());
  EXPECT_TRUE(Rising(growth)) << "growth does not rise";
  EXPECT_EQ(growth.empty() ? 0 : growth.back(), (*top)["bytes"].uinteger());
  EXPECT_GE((*top)["bytes"].uinteger(), reserved_after - reserved_before);
}

TEST(GoldenStories, DataLoaderPinnedSpikeIsPinMemory) {
  const JsonValue truth = Truth("dataloader_pin_h200_truth.json");
  const uint64_t peak = Positive(truth["host_memory_stats"]["allocated_bytes.peak"], "allocated_bytes.peak");
  ASSERT_EQ(truth["pinned_batches"].uinteger(), Positive(truth["batches"], "batches"));

  const JsonValue doc = Report({"pinned", Example("dataloader_pin_h200.pb")});
  EXPECT_EQ(doc["group_by"].str(), "user");
  // Every pinned byte of this run is PyTorch's CachingHostAllocator's, which never gave a block back.
  EXPECT_EQ(doc["pinned"]["peak_bytes"].uinteger(), peak);
  const JsonValue* top = nullptr;
  for (const JsonValue& s : doc["pinned_spikes"].array()) {
    if (top == nullptr || s["rise_bytes"].uinteger() > (*top)["rise_bytes"].uinteger()) top = &s;
  }
  ASSERT_NE(top, nullptr);
  // The DataLoader's pin-memory thread (dataloader_pin.py's docstring) pinned it, from DataLoader's Python code.
  EXPECT_EQ((*top)["thread"].str(), "pt_data_pin");
  std::set<std::string> data_files, pin_functions;
  for (const JsonValue& f : (*top)["stack"].array()) {
    if (f["kind"].str() != "python") continue;
    if (f["file"].str().find("torch/utils/data/") != std::string::npos) data_files.insert(f["file"].str());
    if (f["function"].str().find("pin_memory") != std::string::npos) pin_functions.insert(f["function"].str());
  }
  EXPECT_FALSE(data_files.empty()) << "no Python frame under torch/utils/data/";
  EXPECT_FALSE(pin_functions.empty()) << "no Python function named *pin_memory*";
}

struct Rank {
  const char* trace;
  const char* truth;
};
constexpr Rank kRanks[] = {{"ddp_rank0_h200.pb", "ddp_rank0_h200_truth.json"},
                           {"ddp_rank1_h200.pb", "ddp_rank1_h200_truth.json"}};

TEST(GoldenStories, DdpRanksListsBothRanks) {
  std::vector<std::string> args = {"ranks"};
  std::set<int64_t> want;
  for (const Rank& r : kRanks) {
    args.push_back(Example(r.trace));
    want.insert(Truth(r.truth)["rank"].integer());
  }
  ASSERT_EQ(want, (std::set<int64_t>{0, 1}));
  const JsonValue doc = Report(args);
  std::set<int64_t> got;
  for (const JsonValue& entry : doc["ranks"].array()) {
    got.insert(entry["rank"].integer());
    for (const Rank& r : kRanks) {
      const JsonValue truth = Truth(r.truth);
      if (truth["rank"].integer() != entry["rank"].integer()) continue;
      EXPECT_EQ(entry["world_size"].integer(), truth["world_size"].integer());
      EXPECT_EQ(entry["local_rank"].integer(), truth["local_rank"].integer());
      ASSERT_EQ(entry["devices"].size(), 1u);
      EXPECT_EQ(entry["devices"][0]["device"].integer(), truth["device"].integer());
    }
  }
  EXPECT_EQ(got, want);
}

// True if some frame of `stack` lies in a module whose path contains `module`.
bool StackThrough(FrameResolver& resolver, uint64_t stack, const std::string& module) {
  for (const Frame& f : resolver.ResolveStack(stack, 1000)) {
    if (f.module.find(module) != std::string::npos) return true;
  }
  return false;
}

TEST(GoldenStories, DdpEachRankMatchesItsAllocatorAndOwnsNccl) {
  for (const Rank& r : kRanks) {
    SCOPED_TRACE(r.trace);
    const JsonValue truth = Truth(r.truth);
    const int32_t device = static_cast<int32_t>(truth["device"].integer());
    const uint64_t reserved_peak =
        Positive(truth["memory_stats"]["reserved_bytes.all.peak"], "reserved_bytes.all.peak");

    // PyTorch's caching allocator's segments (stacks through libc10_cuda.so, one group per stack) at the device's
    // peak: the allocator never freed one (reserved_bytes.all.freed), so all of them, its own peak.
    ASSERT_EQ(truth["memory_stats"]["reserved_bytes.all.freed"].type(), JsonValue::Type::kNumber);
    ASSERT_EQ(truth["memory_stats"]["reserved_bytes.all.freed"].uinteger(), 0u);
    absl::StatusOr<std::unique_ptr<Analysis>> a = Analyze(Example(r.trace), {});
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ((*a)->info.header.rank, truth["rank"].integer());
    FrameResolver resolver((*a)->stacks, (*a)->symbols, (*a)->python_frames);
    const PeakResult* peak = (*a)->FindPeak(device, static_cast<int>(format::Kind::kDevice));
    ASSERT_NE(peak, nullptr);
    ASSERT_TRUE(peak->at_peak.taken);
    uint64_t c10 = 0;
    for (const StackGroup& g : peak->at_peak.groups) {
      if (StackThrough(resolver, g.stack, "libc10_cuda.so")) c10 += g.bytes;
    }
    EXPECT_EQ(c10, reserved_peak);

    // NCCL allocated its buffers on this rank's GPU (the run did an all_reduce: truth all_reduce got == want).
    ASSERT_EQ(truth["all_reduce"]["got"].number(), truth["all_reduce"]["want"].number());
    const JsonValue summary = Report({"summary", Example(r.trace)});
    bool nccl_on_gpu = false;
    for (const JsonValue& o : summary["owners"].array()) {
      if (o["owner"].str() == "nccl" && o["device"].integer() == device && o["bytes_allocated"].uinteger() > 0) {
        nccl_on_gpu = true;
      }
    }
    EXPECT_TRUE(nccl_on_gpu) << "no owner nccl on device " << device;
  }
}

}  // namespace
}  // namespace cumemtrace::analyzer
