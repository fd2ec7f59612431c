// The real traces leaky_h200.pb and torch_train_pinned_h200.pb in examples/ were captured on an NVIDIA H200
// (examples/README.md says how), where the programs' own oracles gave the figures below: PyTorch's
// memory_stats/host_memory_stats and compute-sanitizer's leak check. The analyzer must keep deriving exactly those
// figures from the traces, on a machine without the binaries (this one): function names come from the traces' own
// symbols.
#include <cstdint>
#include <string>

#include "analyzer/model/analysis.h"
#include "analyzer/model/stacks/frame_resolver.h"
#include "gtest/gtest.h"
#include "proto/format.h"

namespace cumemtrace::analyzer {
namespace {

std::unique_ptr<Analysis> Load(const std::string& name) {
  absl::StatusOr<std::unique_ptr<Analysis>> a = Analyze(std::string(CUMEMTRACE_EXAMPLES_DIR) + "/" + name, {});
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *std::move(a) : nullptr;
}

// True if some frame of `stack` lies in a module whose path contains `module` and, when given, whose function
// name contains `function`.
bool StackHas(FrameResolver& resolver, uint64_t stack, const std::string& module, const std::string& function) {
  for (const Frame& f : resolver.ResolveStack(stack, 1000)) {
    if (f.module.find(module) != std::string::npos &&
        (function.empty() || f.function.find(function) != std::string::npos)) {
      return true;
    }
  }
  return false;
}

TEST(GoldenExamples, LeakyMatchesComputeSanitizer) {
  auto a = Load("leaky_h200.pb");
  ASSERT_NE(a, nullptr);
  FrameResolver resolver(a->stacks, a->symbols);
  // compute-sanitizer --leak-check full: 3 leaks, 3145728 + 5242880 + 7340032 bytes.
  uint64_t bytes = 0, count = 0, weights = 0, scratch = 0;
  for (const LeakGroup& g : a->leaks) {
    if (g.kind != format::Kind::kDevice) continue;
    bytes += g.bytes;
    count += g.count;
    if (StackHas(resolver, g.stack, "leaky", "leak_model_weights")) weights += g.bytes;
    if (StackHas(resolver, g.stack, "leaky", "leak_scratch")) scratch += g.bytes;
  }
  EXPECT_EQ(bytes, 15728640u);
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(weights, 3145728u + 5242880u);
  EXPECT_EQ(scratch, 7340032u);
  // The planted cudaMalloc(2^50) failed with cudaErrorMemoryAllocation (the driver's CUDA_ERROR_OUT_OF_MEMORY).
  ASSERT_EQ(a->ooms.size(), 1u);
  EXPECT_EQ(a->ooms[0].event.size, uint64_t{1} << 50);
  EXPECT_EQ(a->ooms[0].event.result, 2);
  EXPECT_TRUE(a->ooms[0].event.has_mem_info);
  EXPECT_TRUE(StackHas(resolver, a->ooms[0].event.stack, "leaky", "planted_oom"));
}

// Grouped by user frame (the CLI's default), the same leaks land on the program's own functions, not on the static
// CUDA runtime linked into the same executable: leak_model_weights (two calls, one group) and leak_scratch.
TEST(GoldenExamples, LeakyGroupsByUserFrame) {
  AnalyzeOptions options;
  options.grouping.by = GroupBy::kUser;
  absl::StatusOr<std::unique_ptr<Analysis>> a =
      Analyze(std::string(CUMEMTRACE_EXAMPLES_DIR) + "/leaky_h200.pb", options);
  ASSERT_TRUE(a.ok()) << a.status();
  FrameResolver resolver((*a)->stacks, (*a)->symbols, (*a)->python_frames);
  uint64_t weights = 0, scratch = 0, weights_stacks = 0;
  for (const LeakGroup& g : (*a)->leaks) {
    ASSERT_EQ(g.key.kind, GroupKey::Kind::kFrame);
    const std::string& f = resolver.ResolvePc(g.key.value).function;
    if (f.find("leak_model_weights") != std::string::npos) {
      weights += g.bytes;
      weights_stacks += g.stacks;
    }
    if (f.find("leak_scratch") != std::string::npos) scratch += g.bytes;
  }
  EXPECT_EQ(weights, 3145728u + 5242880u);
  EXPECT_EQ(scratch, 7340032u);
  EXPECT_EQ(weights_stacks, 2u);
}

TEST(GoldenExamples, TorchTrainingMatchesPytorchCounters) {
  auto a = Load("torch_train_pinned_h200.pb");
  ASSERT_NE(a, nullptr);
  FrameResolver resolver(a->stacks, a->symbols);
  // torch.cuda.host_memory_stats()["allocated_bytes.peak"] = 83927044, allocated by thread pt_data_pin.
  EXPECT_EQ(a->pinned.peak_bytes, 83927044u);
  // torch.cuda.memory_stats()["reserved_bytes.all.peak"] = 547356672: the caching allocator's own segments (stacks
  // through libc10_cuda.so), all live at the device peak since the allocator never released one in this run.
  const PeakResult* peak = a->FindPeak(0, static_cast<int>(format::Kind::kDevice));
  ASSERT_NE(peak, nullptr);
  ASSERT_TRUE(peak->at_peak.taken);
  uint64_t c10 = 0, others = 0;
  for (const StackGroup& g : peak->at_peak.groups) {
    if (StackHas(resolver, g.stack, "libc10_cuda.so", "")) c10 += g.bytes; else others += g.bytes;
  }
  EXPECT_EQ(c10, 547356672u);
  // Outside PyTorch's allocator: cuBLAS's workspaces (128.25 MiB in 6 allocations), attributed to libcublas.
  EXPECT_EQ(others, 134481920u);
  EXPECT_EQ(peak->counter.peak_bytes, 547356672u + 134481920u);
}

}  // namespace
}  // namespace cumemtrace::analyzer
