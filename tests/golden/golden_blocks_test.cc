// PyTorch's caching-allocator layer on real traces from an H100 (examples/README.md says how each was made): GPT-2
// training with checkpoints, a fragmentation OOM, the validation-OOM and slow-leak stories, each traced with the block
// layer. Beside each trace lies the truth JSON its workload wrote on the GPU machine (tests/gpu/workloads/*.py):
// memory_stats() at each checkpoint, PyTorch's OOM figures, the script's own lines. Every expected figure is read from
// that JSON.
//
// A checkpoint of gpt2_blocks_h100.pb is tied to the trace by a marker: right after PyTorch's figures were read, the
// workload made one driver allocation of 777 + index bytes (tests/gpu/workloads/allocator_common.py); the allocator
// layer at that marker's sequence number must give PyTorch's figures exactly, extents reconstructed included.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "analyzer/commands/run_cli.h"
#include "analyzer/model/torch/allocator_map.h"
#include "analyzer/reader/trace_reader.h"
#include "gtest/gtest.h"
#include "tests/golden/golden_support.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/json_value.h"

namespace cumemtrace::analyzer {
namespace {

using test::JsonValue;

using golden::Example;
using golden::MarkerSeq;
using golden::ParseOrFail;
using golden::Report;
using golden::Truth;

uint64_t Stat(const JsonValue& stats, const std::string& key) {
  EXPECT_EQ(stats[key].type(), JsonValue::Type::kNumber) << key << " is missing from the truth";
  return stats[key].uinteger();
}

class GoldenGpt2 : public testing::TestWithParam<std::string> {};

// The same GPT-2 run with the default allocator and with expandable segments.
TEST_P(GoldenGpt2, CheckpointsEqualMemoryStats) {
  const std::string trace = Example(GetParam() + ".pb");
  const JsonValue truth = Truth(GetParam() + "_truth.json");
  const JsonValue events = Report({"events", trace});
  ASSERT_EQ(truth["checkpoints"].array().size(), 4u);
  for (const JsonValue& cp : truth["checkpoints"].array()) {
    const std::string name = cp["name"].str();
    const JsonValue& s = cp["stats"];
    absl::StatusOr<AllocatorMap> map = AllocatorMapAt(trace, 0, MarkerSeq(events, cp["marker_size"].uinteger()));
    ASSERT_TRUE(map.ok()) << map.status();
    const TorchFigures& f = map->figures;
    EXPECT_EQ(f.allocations, Stat(s, "allocation.all.current")) << name;
    EXPECT_EQ(f.requested_bytes, Stat(s, "requested_bytes.all.current")) << name;
    EXPECT_EQ(f.allocated_bytes, Stat(s, "allocated_bytes.all.current")) << name;
    EXPECT_EQ(f.active_bytes, Stat(s, "active_bytes.all.current")) << name;
    EXPECT_EQ(f.reserved_bytes, Stat(s, "reserved_bytes.all.current")) << name;
    // With expandable segments PyTorch counts no segments; the layer follows it.
    EXPECT_EQ(f.segments, Stat(s, "segment.all.current")) << name;
  }
}

TEST_P(GoldenGpt2, PeaksEqualMemoryStats) {
  const JsonValue truth = Truth(GetParam() + "_truth.json");
  const JsonValue& last = truth["checkpoints"].array().back()["stats"];  // nothing is allocated after it
  const JsonValue peak = Report({"peak", Example(GetParam() + ".pb")});
  const JsonValue& d = peak["allocator"]["devices"].array().at(0);
  EXPECT_EQ(d["allocated_peak_bytes"].uinteger(), Stat(last, "allocated_bytes.all.peak"));
  EXPECT_EQ(d["requested_peak_bytes"].uinteger(), Stat(last, "requested_bytes.all.peak"));
  EXPECT_EQ(d["reserved_peak_bytes"].uinteger(), Stat(last, "reserved_bytes.all.peak"));
  EXPECT_FALSE(peak["allocator"]["estimate"].boolean());
}

INSTANTIATE_TEST_SUITE_P(GoldenBlocks, GoldenGpt2,
                         testing::Values("gpt2_blocks_h100", "gpt2_blocks_expandable_h100"));

// frag_oom ran under a per-process memory fraction (PyTorch's message: "2.20 GiB allowed", with 76.66 GiB free):
// the cause is the cap, not the holes.
TEST(GoldenBlocks, FragmentationOomVerdict) {
  const JsonValue truth = Truth("frag_oom_h100_truth.json");
  ASSERT_NE(truth["message"].str().find("GiB allowed"), std::string::npos);
  const JsonValue oom = Report({"oom", Example("frag_oom_h100.pb")});
  ASSERT_EQ(oom["torch_ooms"].array().size(), 1u);
  const JsonValue& v = oom["torch_ooms"].array()[0]["verdict"];
  EXPECT_EQ(v["cause"].str(), "memory_cap");
  EXPECT_EQ(v["request_bytes"].uinteger(), truth["request"].uinteger());
  EXPECT_EQ(v["reserved_unallocated_bytes"].uinteger(), truth["reserved_minus_allocated_at_oom"].uinteger());
}

// Story 1 at the tensor level: the figure of PyTorch's own message, and the tensors live at the OOM named by the
// validation line.
TEST(GoldenBlocks, ValidationOomNamesTheLineAndReproducesPyTorchsFigure) {
  const JsonValue truth = Truth("story_oom_blocks_h100_truth.json");
  const JsonValue& stats = truth["memory_stats"];
  const JsonValue oom = Report({"oom", Example("story_oom_blocks_h100.pb")});
  ASSERT_GE(oom["torch_ooms"].array().size(), 1u);
  const JsonValue& first = oom["torch_ooms"].array()[0];
  EXPECT_EQ(first["verdict"]["reserved_unallocated_bytes"].uinteger(),
            Stat(stats, "reserved_bytes.all.current") - Stat(stats, "allocated_bytes.all.current"));
  EXPECT_EQ(first["verdict"]["cause"].str(), "live_tensors");
  ASSERT_GE(first["tensors"].array().size(), 1u);
  const JsonValue& top = first["tensors"].array()[0]["user_frame"];
  EXPECT_EQ(top["line"].uinteger(), truth["validation_line"].uinteger());
  EXPECT_NE(top["file"].str().find("story_oom.py"), std::string::npos) << top["file"].str();
}

// Story 3 at the tensor level: PyTorch's cache is not a leak; what it reserved equals memory_stats().
TEST(GoldenBlocks, SlowLeakKeepsCacheApartFromTensors) {
  const JsonValue truth = Truth("story_leak_blocks_h100_truth.json");
  const JsonValue leaks = Report({"leaks", Example("story_leak_blocks_h100.pb")});
  const JsonValue& a = leaks["allocator_leaks"];
  EXPECT_EQ(a["pytorch_reserved_bytes"].uinteger(), Stat(truth["memory_stats"], "reserved_bytes.all.current"));
  EXPECT_EQ(a["pytorch_cached_bytes"].uinteger(),
            a["pytorch_reserved_bytes"].uinteger() - a["tensor_allocated_bytes"].uinteger());
  bool cache_flagged = false, tensors_at_the_loop = false;
  for (const JsonValue& l : leaks["leaks"].array()) {
    cache_flagged |= l["cached_by_pytorch"].boolean();
    if (l["kind"].str() == "torch_block") {
      tensors_at_the_loop |= l["user_frame"]["line"].uinteger() == truth["forward_line"].uinteger() ||
                             l["user_frame"]["line"].uinteger() == truth["append_line"].uinteger();
    }
  }
  EXPECT_TRUE(cache_flagged);
  EXPECT_TRUE(tensors_at_the_loop);
}

// A run of hours as traced with `--time-resolution 10us` (trace format 6: batches as one zstd stream, times in
// 10 us units): 40 steps of the CPU-bound GPT-2 loop keeping a 16 KiB tensor every 4 steps, then an OOM. What the
// reports say is PyTorch's own figures, and every time lies on the grid.
TEST(GoldenBlocks, LongRunAtTenMicrosecondsEqualsMemoryStats) {
  const std::string trace = Example("long_run_10us_h100.pb");
  const JsonValue truth = Truth("long_run_10us_h100_truth.json");
  const JsonValue& stats = truth["memory_stats"];

  struct Grid : TraceVisitor {
    void OnHeader(const TraceHeader& h) override { header = h; }
    void OnEvent(const Event& e) override {
      off_grid += (e.time_ns - header.start_time_ns) % 10000 != 0;
      blocks += e.info != nullptr && e.info->kind == format::Kind::kTorchBlock && e.info->op == format::Op::kAlloc;
    }
    TraceHeader header;
    uint64_t off_grid = 0, blocks = 0;
  } grid;
  ReadStats read;
  ASSERT_TRUE(ReadTrace(trace, grid, &read).ok());
  EXPECT_EQ(grid.header.format_version, 6u);
  EXPECT_EQ(read.damaged_packets + read.undecodable_batches, 0u);
  EXPECT_EQ(grid.off_grid, 0u);
  EXPECT_EQ(grid.blocks, truth["allocations"].uinteger());

  const JsonValue peak = Report({"peak", trace});
  const JsonValue& d = peak["allocator"]["devices"].array().at(0);
  EXPECT_EQ(d["allocated_peak_bytes"].uinteger(), Stat(stats, "allocated_bytes.all.peak"));
  EXPECT_EQ(d["requested_peak_bytes"].uinteger(), Stat(stats, "requested_bytes.all.peak"));
  EXPECT_EQ(d["reserved_peak_bytes"].uinteger(), Stat(stats, "reserved_bytes.all.peak"));

  // At the OOM: the live tensors are PyTorch's allocated bytes, the kept ones among them at their line.
  const JsonValue oom = Report({"oom", trace});
  ASSERT_EQ(oom["torch_ooms"].array().size(), 1u);
  const JsonValue& at = oom["torch_ooms"].array()[0];
  uint64_t live = at["tensor_other_bytes"].uinteger();
  bool kept_found = false;
  for (const JsonValue& g : at["tensors"].array()) {
    live += g["bytes"].uinteger();
    if (g["user_frame"].type() == JsonValue::Type::kObject &&
        g["user_frame"]["line"].uinteger() == truth["leak_line"].uinteger()) {
      kept_found = true;
      EXPECT_EQ(g["count"].uinteger(), truth["kept"].uinteger());
      EXPECT_EQ(g["bytes"].uinteger(), truth["kept_bytes"].uinteger());
    }
  }
  EXPECT_TRUE(kept_found) << "no live group at the leak-kept line";
  EXPECT_EQ(live, Stat(stats, "allocated_bytes.all.current"));
}

}  // namespace
}  // namespace cumemtrace::analyzer
