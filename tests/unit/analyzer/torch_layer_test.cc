// PyTorch's caching-allocator layer through the whole analyzer: a trace with TORCH_* events and an AllocatorAttach
// (trace_builder.h) read by Analyze(), the reports and the CLI's text and JSON. Every figure is worked out below by
// hand from PyTorch's rules, so the test states what memory_stats() would have said.
#include <memory>
#include <string>

#include "analyzer/model/torch/allocator_map.h"
#include "analyzer/model/analysis.h"
#include "analyzer/reports/leak_report.h"
#include "analyzer/reports/oom_report.h"
#include "analyzer/reports/peak_report.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {
namespace {

using format::Api;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kCuda = 0x10100;    // libcuda.so.1
constexpr uint64_t kC10 = 0x30100;     // libc10_cuda.so
constexpr uint64_t kCublas = 0x50100;  // libcublas.so.13
constexpr uint64_t kSeg = 0x10000000;
constexpr char kVal[] = "/home/u/proj/val.py";
constexpr char kModeling[] = "/venv/lib/python3.12/site-packages/transformers/modeling_gpt2.py";

// Events (device 0, 80 GiB; sizes in MiB unless said):
//   1  cudaMalloc 0x10000000 20 (libc10_cuda: PyTorch's segment)        driver: pytorch 20
//   2  TORCH_SEGMENT_ALLOC 0x10000000 20                                reserved 20 (peak)
//   3  TORCH_ALLOC +0 8 from val.py:42 (T1)                            allocated 8: split, 12 free after it
//   4  TORCH_ALLOC +8 4 from modeling_gpt2.py:212 (T2)                 allocated 12 (peak), 8 free
//   5  TORCH_FREE_REQUESTED +8                                         allocated 8, requested still 12
//   6  TORCH_FREE_COMPLETED +8                                         12 MiB free block again
//   7  TORCH_ALLOC +8 2 MiB + 100 B from T2                            extent 2 MiB + 512, 10 MiB - 512 free
//   8  cudaMalloc 0x30000000 8 (cuBLAS)                                driver: cublas 8
//   9  cudaMalloc 16 MiB fails (PyTorch's stack), driver free 6 MiB of 80 GiB
//  10  TORCH_OOM request 16 MiB, 6 MiB free                            verdict: fragmentation (10 MiB - 512
//                                                                      unallocated + 6 MiB free >= 16 MiB? no:
//                                                                      15.99 < 16) -> see below
//  11  TORCH_FREE_REQUESTED 0x70000000 (a block older than the tracker: not in any segment)
// At the OOM: reserved 20 MiB, allocated 10 MiB + 512, unallocated 10 MiB - 512, largest free 10 MiB - 512.
// need = 16 - 6 = 10 MiB > unallocated: shortfall 512 B. Outside PyTorch: cuBLAS 8 MiB (traced) + untraced
// (80 GiB - 6 MiB used... minus traced 28 MiB). The untraced part dwarfs the tensors: outside_pytorch.
// With request 12 MiB instead (second trace) the cache in one piece would hold it, but the untraced 80 GiB is still
// the largest part whose removal makes room: outside_pytorch again (ranked by size; see JudgeOomRanksBySize).
std::string WriteTorchTrace(const std::string& name, uint64_t oom_request, const std::string& config = "",
                            bool at_first_segment = true) {
  TraceBuilder b;
  format::Header h = TraceBuilder::DefaultHeader();
  h.set_executable("/usr/bin/python3.12");
  h.set_python_frames_enabled(true);
  b.Header(h)
      .Device(0, "NVIDIA H100", 80 * 1024 * kMiB)
      .Thread(0, 100, "python")
      .Module(1, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", 0x10000, 0x10000, 0x20000)
      .Module(2, "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so", 0x30000, 0x30000, 0x40000)
      .Module(3, "/venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.13", 0x50000, 0x50000, 0x60000)
      .Strings(1, {"validate", kVal, "GPT2Attention.forward", kModeling, "<module>",
                   "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long)"})
      // 1 validate (val.py:42)  2 GPT2Attention.forward (modeling_gpt2.py:212)  3 <module> (val.py:60)
      .PythonFrames(1, {1, 3, 5}, {2, 4, 2}, {42, 212, 60});
  const uint64_t seg = b.Stack({kCuda, kC10, PyPc(1), PyPc(3)});
  const uint64_t t1 = b.Stack({kC10, PyPc(1), PyPc(3)});
  const uint64_t t2 = b.Stack({kC10, PyPc(2), PyPc(1), PyPc(3)});
  const uint64_t cublas = b.Stack({kCuda, kCublas, PyPc(2), PyPc(1), PyPc(3)});
  b.AllocatorAttach(0, config, at_first_segment);
  Ev fail = Alloc(9, 9, 0, 16 * kMiB, seg);
  fail.result = 2;
  fail.has_mem_info = true;
  fail.free_bytes = 6 * kMiB;
  fail.total_bytes = 80 * 1024 * kMiB;
  b.Events({Alloc(1, 1, kSeg, 20 * kMiB, seg), Torch(2, 2, Api::kTorchSegmentAlloc, kSeg, 20 * kMiB),
            Torch(3, 3, Api::kTorchAlloc, kSeg, 8 * kMiB, t1),
            Torch(4, 4, Api::kTorchAlloc, kSeg + 8 * kMiB, 4 * kMiB, t2),
            Torch(5, 5, Api::kTorchFreeRequested, kSeg + 8 * kMiB),
            Torch(6, 6, Api::kTorchFreeCompleted, kSeg + 8 * kMiB),
            Torch(7, 7, Api::kTorchAlloc, kSeg + 8 * kMiB, 2 * kMiB + 100, t2),
            Alloc(8, 8, 0x30000000, 8 * kMiB, cublas), fail,
            Torch(10, 10, Api::kTorchOom, 0, oom_request, seg, 0, 6 * kMiB),
            Torch(11, 11, Api::kTorchFreeRequested, 0x70000000)})
      .Symbols({kC10}, {6}, {2}, {0x100})
      .Trailer(11, kStartNs + 20'000'000);
  return b.Write(name);
}

std::unique_ptr<Analysis> Load(const std::string& path, GroupBy by = GroupBy::kUser) {
  AnalyzeOptions o;
  o.grouping.by = by;
  absl::StatusOr<std::unique_ptr<Analysis>> a = Analyze(path, o);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *std::move(a) : nullptr;
}

TEST(TorchLayer, CountersMatchMemoryStats) {
  auto a = Load(WriteTorchTrace("torch_counters.pb", 16 * kMiB));
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->allocator.attached);
  ASSERT_EQ(a->allocator.devices.size(), 1u);
  const TorchDeviceResult& d = a->allocator.devices[0];
  EXPECT_EQ(d.stats.allocated_bytes.peak, 12 * kMiB);
  EXPECT_EQ(d.stats.requested_bytes.peak, 12 * kMiB);
  EXPECT_EQ(d.stats.reserved_bytes.peak, 20 * kMiB);
  EXPECT_EQ(d.stats.allocated_at_reserved_peak, 8 * kMiB);  // after the ALLOC that asked for the segment
  EXPECT_EQ(d.at_end.allocated_bytes, 10 * kMiB + 512);     // 8 MiB + (2 MiB + 100 rounded to 512)
  EXPECT_EQ(d.at_end.requested_bytes, 10 * kMiB + 100);
  EXPECT_EQ(d.at_end.allocations, 2u);
  EXPECT_EQ(d.at_end.reserved_bytes, 20 * kMiB);
  EXPECT_EQ(d.at_end.largest_free_block, 10 * kMiB - 512);
  EXPECT_EQ(d.stats.predating_frees, 1u);
  EXPECT_FALSE(a->allocator.estimate());
  // The predating free is no anomaly; TORCH_* events never reach device totals or owners.
  EXPECT_EQ(a->model.unmatched_frees, 0u);
  EXPECT_EQ(a->model.predating_torch_frees, 1u);
  const PeakResult* total = a->FindPeak(0, kDeviceTotalSeries);
  ASSERT_NE(total, nullptr);
  EXPECT_EQ(total->counter.peak_bytes, 28 * kMiB);
  for (const OwnerUsage& o : a->owners) {
    if (o.name.slug == "pytorch") {
      EXPECT_EQ(o.peak_bytes, 20 * kMiB);
    }
  }
  // Tensors at the allocated peak, grouped by the user's line: both tensors come from val.py:42 validate.
  ASSERT_TRUE(d.at_allocated_peak.taken);
  EXPECT_EQ(d.at_allocated_peak.total_bytes, 12 * kMiB);
  EXPECT_EQ(d.at_allocated_peak.groups.size(), 1u);
}

TEST(TorchLayer, OomVerdicts) {
  // 16 MiB with 6 MiB free and 10 MiB - 512 unallocated: 512 B short even with a perfect cache, and memory
  // outside PyTorch (untraced: the rest of the 80 GiB) is far larger than the tensors.
  auto a = Load(WriteTorchTrace("torch_oom_outside.pb", 16 * kMiB));
  ASSERT_NE(a, nullptr);
  FrameResolver resolver(a->stacks, a->symbols, a->python_frames);
  OomReport r = BuildOomReport(*a, ReportOptions{}, resolver);
  ASSERT_EQ(r.torch_ooms.size(), 1u);
  const OomVerdict& v = r.torch_ooms[0].verdict;
  EXPECT_EQ(v.cause, OomCause::kOutsidePytorch);
  EXPECT_EQ(v.reserved_unallocated_bytes, 10 * kMiB - 512);  // PyTorch's "reserved but unallocated"
  EXPECT_EQ(v.allocated_bytes, 10 * kMiB + 512);
  EXPECT_EQ(v.largest_free_block, 10 * kMiB - 512);
  EXPECT_EQ(v.shortfall_bytes, 512u);
  EXPECT_EQ(v.outside_traced_bytes, 8 * kMiB);
  ASSERT_EQ(v.outside.size(), 1u);
  EXPECT_EQ(v.outside[0].name.slug, "cublas");
  EXPECT_EQ(v.outside_untraced_bytes, 80 * 1024 * kMiB - 6 * kMiB - 28 * kMiB);
  // The tensors by Python frame: validate (8 MiB) and GPT2Attention.forward (2 MiB + 512).
  ASSERT_EQ(r.torch_ooms[0].tensors_by_python.size(), 2u);
  EXPECT_EQ(r.torch_ooms[0].tensors_by_python[0].label.user_frame->function, "validate");
  EXPECT_EQ(r.torch_ooms[0].tensors_by_python[1].label.user_frame->function, "GPT2Attention.forward");
  // The failed cudaMalloc that PyTorch made gets a verdict too.
  ASSERT_EQ(r.ooms.size(), 1u);
  EXPECT_TRUE(r.ooms[0].has_verdict);

  // 12 MiB: the cache (10 MiB - 512) plus 6 MiB free would have held it, and so would the tensors' or the outside
  // memory's removal; the outside memory is the largest of the three.
  auto b = Load(WriteTorchTrace("torch_oom_frag.pb", 12 * kMiB));
  ASSERT_NE(b, nullptr);
  OomReport rb = BuildOomReport(*b, ReportOptions{}, resolver);
  ASSERT_EQ(rb.torch_ooms.size(), 1u);
  EXPECT_EQ(rb.torch_ooms[0].verdict.cause, OomCause::kOutsidePytorch);
  EXPECT_TRUE(rb.torch_ooms[0].verdict.cause_suffices);
}

// The verdict names the largest part whose removal alone makes room, else the largest part; a request the driver
// had free was refused by a cap. Figures as PyTorch's messages give them (MiB).
TEST(TorchLayer, JudgeOomRanksBySize) {
  auto judge = [](uint64_t request, uint64_t free, uint64_t total, uint64_t allocated, uint64_t reserved,
                  uint64_t traced) {
    TorchAtFailure at;
    at.figures.allocated_bytes = allocated * kMiB;
    at.figures.reserved_bytes = reserved * kMiB;
    at.traced_device_bytes = traced * kMiB;
    return JudgeOom(request * kMiB, true, free * kMiB, total * kMiB, at, false);
  };
  // Validation keeping its outputs: 78 GiB of tensors, 33 MiB of holes, 166 MiB free, a 2 GiB request.
  OomVerdict v = judge(2048, 166, 81080, 80128, 80161, 80161 + 750);
  EXPECT_EQ(v.cause, OomCause::kLiveTensors);
  EXPECT_TRUE(v.cause_suffices);
  // Another process holds 74 GiB; 2.8 GiB of holes; 1 GiB asked with 200 MiB free: the other process, the
  // largest part, would make room alone (the holes would too, but they are smaller).
  v = judge(1024, 200, 81080, 2000, 4867, 4867);
  EXPECT_EQ(v.cause, OomCause::kOutsidePytorch);
  // Holes the largest part: fragmentation, and the holes alone would make room.
  v = judge(1024, 200, 12000, 2000, 9800, 9800 + 1000);
  EXPECT_EQ(v.cause, OomCause::kFragmentation);
  EXPECT_TRUE(v.cause_suffices);
  // No part alone makes room: the largest, with what would still be missing.
  v = judge(8192, 100, 9000, 3000, 4000, 4000 + 200);
  EXPECT_EQ(v.cause, OomCause::kOutsidePytorch);  // 4.7 GiB outside: the untraced rest of the card
  EXPECT_FALSE(v.cause_suffices);
  EXPECT_EQ(v.still_short_bytes, (8192 - 100 - (9000 - 100 - 4200)) * kMiB);  // used - traced = 4700 outside
  // 76.7 GiB free and 500 MiB refused: a per-process memory cap.
  v = judge(500, 78500, 81080, 1000, 2048, 2048 + 500);
  EXPECT_EQ(v.cause, OomCause::kMemoryCap);
  // A request of the card's whole memory (torch.empty(total_memory)): nothing freed could make room.
  v = judge(81080, 80000, 81080, 150, 160, 160 + 750);
  EXPECT_EQ(v.cause, OomCause::kLargerThanDevice);
  EXPECT_EQ(v.still_short_bytes, 0u);
  v = judge(90000, 80000, 81080, 150, 160, 160 + 750);
  EXPECT_EQ(v.cause, OomCause::kLargerThanDevice);
  EXPECT_EQ(v.still_short_bytes, (90000 - 81080) * kMiB);
}

TEST(TorchLayer, CacheIsNotALeak) {
  auto a = Load(WriteTorchTrace("torch_leaks.pb", 16 * kMiB));
  ASSERT_NE(a, nullptr);
  FrameResolver resolver(a->stacks, a->symbols, a->python_frames);
  LeakReport r = BuildLeakReport(*a, ReportOptions{}, resolver);
  EXPECT_EQ(r.tensor_count, 2u);
  EXPECT_EQ(r.tensor_allocated_bytes, 10 * kMiB + 512);
  EXPECT_EQ(r.tensor_requested_bytes, 10 * kMiB + 100);
  EXPECT_EQ(r.pytorch_cached_bytes, 10 * kMiB - 512);
  EXPECT_EQ(r.pytorch_cache_driver_bytes, 20 * kMiB);
  // The segment is listed after the tensors and cuBLAS's memory, marked as cache.
  ASSERT_FALSE(r.top.empty());
  EXPECT_FALSE(r.top.front().pytorch_cache);
  bool cache_seen = false;
  for (const LeakEntry& e : r.top) {
    if (e.pytorch_cache) {
      cache_seen = true;
      EXPECT_EQ(e.bytes, 20 * kMiB);
    } else {
      EXPECT_FALSE(cache_seen) << "cache listed before a leak";
    }
  }
  EXPECT_TRUE(cache_seen);
}

TEST(TorchLayer, EstimatesAreSaid) {
  auto a = Load(WriteTorchTrace("torch_estimate.pb", 16 * kMiB, "expandable_segments:False,weird_knob:3", false));
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->allocator.estimate());
  const ToolResult t = Tool({"peak", a->info.path});
  EXPECT_NE(t.out.find("allocated bytes are ESTIMATES (settings not modelled: weird_knob:3; attached after the "
                       "allocator's first segment; 3 blocks estimated)"),
            std::string::npos)
      << t.out;
}

TEST(TorchLayer, TextLeadsWithPythonAndTheVerdict) {
  const std::string path = WriteTorchTrace("torch_text.pb", 12 * kMiB);
  const ToolResult oom = Tool({"oom", path});
  EXPECT_EQ(oom.code, 0) << oom.err;
  EXPECT_NE(oom.out.find("device 0: PyTorch ran out of memory: memory outside PyTorch: 80.0 GiB (cuBLAS 8.0 MiB, "
                         "not traced (CUDA context, other processes) 80.0 GiB), the largest holder, against 10.0 MiB "
                         "of tensors\n"),
            std::string::npos)
      << oom.out;
  EXPECT_EQ(oom.out.find("expandable_segments:True would"), std::string::npos) << oom.out;
  EXPECT_NE(oom.out.find("  tensors live then, by Python frame:\n"), std::string::npos) << oom.out;
  EXPECT_NE(oom.out.find("        GPT2Attention.forward (transformers/modeling_gpt2.py:212)\n"), std::string::npos)
      << oom.out;
  EXPECT_NE(oom.out.find("[1 native frame: c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc]"),
            std::string::npos)
      << oom.out;
  const ToolResult peak = Tool({"peak", path});
  EXPECT_NE(peak.out.find("device 0, PyTorch tensors: allocated peak 12.0 MiB in 2 tensors at 0.004 s (requested "
                          "bytes peak 12.0 MiB); reserved peak 20.0 MiB at 0.003 s, of which 8.0 MiB allocated and "
                          "12.0 MiB reserved but unallocated\n"),
            std::string::npos)
      << peak.out;
  const ToolResult leaks = Tool({"leaks", path});
  EXPECT_NE(leaks.out.find("cached by PyTorch, not a leak"), std::string::npos) << leaks.out;
  EXPECT_NE(leaks.out.find("[cached by PyTorch: not a leak]"), std::string::npos) << leaks.out;
}

TEST(TorchLayer, JsonShape) {
  const std::string path = WriteTorchTrace("torch_json.pb", 12 * kMiB);
  const JsonValue j = Json(Tool({"--json", path}));
  const JsonValue& alloc = j["allocator"];
  EXPECT_TRUE(alloc["attached"].boolean());
  EXPECT_FALSE(alloc["estimate"].boolean());
  EXPECT_TRUE(alloc["max_split_size"].is_null());
  const JsonValue& d = alloc["devices"].array()[0];
  EXPECT_EQ(d["allocated_peak_bytes"].integer(), static_cast<int64_t>(12 * kMiB));
  EXPECT_EQ(d["reserved_peak_bytes"].integer(), static_cast<int64_t>(20 * kMiB));
  EXPECT_EQ(d["unallocated_at_reserved_peak"].integer(), static_cast<int64_t>(12 * kMiB));
  EXPECT_EQ(d["at_end"]["allocated_bytes"].integer(), static_cast<int64_t>(10 * kMiB + 512));
  EXPECT_EQ(d["at_allocated_peak"].array().size(), 1u);
  EXPECT_EQ(j["allocator_leaks"]["pytorch_cached_bytes"].integer(), static_cast<int64_t>(10 * kMiB - 512));
  const JsonValue& t = j["torch_ooms"].array()[0];
  EXPECT_EQ(t["verdict"]["cause"].str(), "outside_pytorch");
  EXPECT_EQ(t["verdict"]["reserved_unallocated_bytes"].integer(), static_cast<int64_t>(10 * kMiB - 512));
  EXPECT_EQ(t["tensors_by_python"].array().size(), 2u);
  EXPECT_EQ(j["torch_oom_count"].integer(), 1);
  EXPECT_EQ(j["ooms"].array()[0]["verdict"]["cause"].str(), "outside_pytorch");
  EXPECT_EQ(j["health"]["predating_torch_frees"].integer(), 1);
  bool cache = false;
  for (const JsonValue& l : j["leaks"].array()) cache |= l["cached_by_pytorch"].boolean();
  EXPECT_TRUE(cache);
}

// --group-by python splits what --group-by user keeps together (both tensors run under val.py:42 validate).
TEST(TorchLayer, GroupByPython) {
  const std::string path = WriteTorchTrace("torch_python.pb", 12 * kMiB);
  const JsonValue j = Json(Tool({"peak", path, "--json", "--group-by", "python"}));
  EXPECT_EQ(j["group_by"].str(), "python");
  const JsonValue& groups = j["allocator"]["devices"].array()[0]["at_allocated_peak"];
  ASSERT_EQ(groups.array().size(), 2u);
  EXPECT_EQ(groups.array()[0]["user_frame"]["function"].str(), "validate");
  EXPECT_EQ(groups.array()[0]["bytes"].integer(), static_cast<int64_t>(8 * kMiB));
  EXPECT_EQ(groups.array()[1]["user_frame"]["function"].str(), "GPT2Attention.forward");
  EXPECT_EQ(groups.array()[1]["bytes"].integer(), static_cast<int64_t>(4 * kMiB));
}

// The segment/block map at any moment, by replay.
TEST(TorchLayer, MapAtAnyMoment) {
  const std::string path = WriteTorchTrace("torch_map.pb", 12 * kMiB);
  absl::StatusOr<AllocatorMap> at4 = AllocatorMapAt(path, 0, 4);
  ASSERT_TRUE(at4.ok()) << at4.status();
  ASSERT_EQ(at4->segments.size(), 1u);
  const std::vector<TorchBlockView>& b = at4->segments[0].blocks;
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].address, kSeg);
  EXPECT_EQ(b[0].block.state, TorchBlockState::kAllocated);
  EXPECT_EQ(b[0].block.requested, 8 * kMiB);
  EXPECT_EQ(b[1].block.size, 4 * kMiB);
  EXPECT_EQ(b[2].block.state, TorchBlockState::kFree);
  EXPECT_EQ(b[2].block.size, 8 * kMiB);
  EXPECT_EQ(at4->figures.allocated_bytes, 12 * kMiB);
  absl::StatusOr<AllocatorMap> at5 = AllocatorMapAt(path, 0, 5);
  ASSERT_TRUE(at5.ok());
  EXPECT_EQ(at5->segments[0].blocks[1].block.state, TorchBlockState::kPendingFree);
  absl::StatusOr<AllocatorMap> at6 = AllocatorMapAt(path, 0, 6);
  ASSERT_TRUE(at6.ok());
  ASSERT_EQ(at6->segments[0].blocks.size(), 2u);  // merged back into one 12 MiB free block
  EXPECT_EQ(at6->segments[0].blocks[1].block.size, 12 * kMiB);
}

// A trace without TORCH_* events writes none of the allocator keys.
TEST(TorchLayer, NoLayerNoKeys) {
  TraceBuilder b;
  b.Header().Device(0, "NVIDIA H100", 80 * 1024 * kMiB);
  b.Events({Alloc(1, 1, 0x1000, 4096)}).Trailer(1, kStartNs + 1'000'000);
  const std::string path = b.Write("no_torch.pb");
  const JsonValue j = Json(Tool({"--json", path}));
  EXPECT_FALSE(j.has("allocator"));
  EXPECT_FALSE(j.has("allocator_leaks"));
  EXPECT_FALSE(j.has("torch_ooms"));
  EXPECT_FALSE(j["health"].has("predating_torch_frees"));
  EXPECT_EQ(Tool({"peak", path}).out.find("PyTorch"), std::string::npos);
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
