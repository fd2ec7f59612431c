// torch-snapshot's segments on the real H100 traces in examples/ (examples/README.md says how each was made) against
// PyTorch's own figures, read from the truth JSON each workload wrote on the GPU machine: torch.cuda.memory_stats() and
// the active blocks of PyTorch's own _snapshot() at checkpoints, memory_stats() at an OOM and at the end of a script.
// Nothing expected comes from the analyzer.
//
// What PyTorch's figures are, in terms of the snapshot's segments (the same relations PyTorch's _snapshot() and
// memory_stats() keep between themselves), each checked with tolerance zero:
//   reserved_bytes.all.current        = sum of total_size
//   allocated_bytes.all.current       = sum of allocated_size (extents of active_allocated blocks)
//   active_bytes.all.current          = sum of active_size (and of active_pending_free blocks)
//   requested_bytes.all.current       = sum of requested_size
//   allocation.all.current            = number of active_allocated blocks
//   segment.all.current               = number of segments that are not expandable (PyTorch counts no segment for
//                                       expandable ones: 0 in the expandable truth)
//   inactive_split_bytes.all.current  = inactive blocks of segments split in more than one block, expandable ones
//                                       left out (as PyTorch leaves them out of that figure)
//   _snapshot()'s active blocks       = the active_allocated blocks, as [address, requested_size]
// and in every snapshot, whatever the moment: blocks tile their segment exactly, and each segment's sizes are the
// sums of its blocks.
//
// Moments. A checkpoint's figures hold right before its marker (golden_support.h's MarkerSeq); an OOM's figures
// (frag_oom's "after", story_oom's memory_stats) right after the torch.oom event, the script reading them in its
// `except` with nothing allocated or freed in between; story_leak's memory_stats at the end of the script, located
// in time (the trace's clock is the script's CLOCK_MONOTONIC): no event lies between the script's last step and
// the writing of the truth, so the figures hold right after the last event before that step. The
// snapshot at a moment is BuildTorchSnapshot up to that sequence number, written by the exporter as JSON (its
// device_traces left out: tests/pictures/torch_snapshot_test.py replays them against the same checkpoints).
//
// The end of each trace, through the command (`torch-snapshot --json`): the interpreter frees tensors after the
// last figure was read, so no truth gives the tensors live at the end; PyTorch gives no segment back then (no
// empty_cache, and an OOM releases cached segments before its torch.oom event), so reserved at the end is the last
// reserved figure of the truth.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/export/export_torch_snapshot.h"
#include "analyzer/model/torch/torch_snapshot.h"
#include "gtest/gtest.h"
#include "tests/golden/golden_support.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/json_value.h"

namespace cumemtrace::analyzer {
namespace {

using golden::Example;
using golden::MarkerSeq;
using golden::ParseOrFail;
using golden::Report;
using golden::Truth;
using test::JsonValue;

using Blocks = std::vector<std::pair<uint64_t, uint64_t>>;  // [address, requested_size]

struct Figures {
  uint64_t reserved = 0, allocated = 0, active = 0, requested = 0, allocations = 0, segments = 0;
  uint64_t inactive_split = 0;
  Blocks active_blocks;  // sorted
};

// The figures of a snapshot (its JSON), checking on the way that blocks tile their segments and that each
// segment's sizes are its blocks'.
Figures SnapshotFigures(const JsonValue& snapshot, const std::string& where) {
  Figures f;
  for (const JsonValue& seg : snapshot["segments"].array()) {
    const uint64_t start = seg["address"].uinteger();
    const uint64_t total = seg["total_size"].uinteger();
    const bool expandable = seg["is_expandable"].boolean();
    const size_t n = seg["blocks"].size();
    uint64_t at = start, allocated = 0, active = 0, requested = 0, inactive = 0;
    for (const JsonValue& b : seg["blocks"].array()) {
      const uint64_t size = b["size"].uinteger();
      const std::string state = b["state"].str();
      EXPECT_EQ(b["address"].uinteger(), at) << where << ": blocks do not tile segment " << start;
      EXPECT_GT(size, 0u) << where;
      at += size;
      if (state == "inactive") {
        EXPECT_EQ(b["requested_size"].uinteger(), 0u) << where;
        inactive += size;
        continue;
      }
      EXPECT_LE(b["requested_size"].uinteger(), size) << where << ": a block smaller than requested";
      active += size;
      requested += b["requested_size"].uinteger();
      if (state == "active_allocated") {
        allocated += size;
        ++f.allocations;
        f.active_blocks.emplace_back(b["address"].uinteger(), b["requested_size"].uinteger());
      } else {
        EXPECT_EQ(state, "active_pending_free") << where;
      }
    }
    EXPECT_EQ(at, start + total) << where << ": the blocks of segment " << start << " do not end at its end";
    EXPECT_EQ(seg["allocated_size"].uinteger(), allocated) << where;
    EXPECT_EQ(seg["active_size"].uinteger(), active) << where;
    EXPECT_EQ(seg["requested_size"].uinteger(), requested) << where;
    f.reserved += total;
    f.allocated += allocated;
    f.active += active;
    f.requested += requested;
    if (!expandable) {
      ++f.segments;
      if (n > 1) f.inactive_split += inactive;
    }
  }
  std::sort(f.active_blocks.begin(), f.active_blocks.end());
  return f;
}

uint64_t Stat(const JsonValue& stats, const std::string& key) {
  EXPECT_EQ(stats[key].type(), JsonValue::Type::kNumber) << key << " is missing from the truth";
  return stats[key].uinteger();
}

void ExpectMemoryStats(const Figures& f, const JsonValue& stats, const std::string& where) {
  EXPECT_EQ(f.reserved, Stat(stats, "reserved_bytes.all.current")) << where;
  EXPECT_EQ(f.allocated, Stat(stats, "allocated_bytes.all.current")) << where;
  EXPECT_EQ(f.active, Stat(stats, "active_bytes.all.current")) << where;
  EXPECT_EQ(f.requested, Stat(stats, "requested_bytes.all.current")) << where;
  EXPECT_EQ(f.allocations, Stat(stats, "allocation.all.current")) << where;
  EXPECT_EQ(f.segments, Stat(stats, "segment.all.current")) << where;
  EXPECT_EQ(f.inactive_split, Stat(stats, "inactive_split_bytes.all.current")) << where;
}

// The snapshot right after event `seq`, as the exporter writes it (without device_traces), and its figures.
Figures FiguresAt(const std::string& trace, uint64_t seq, const std::string& where) {
  absl::StatusOr<std::unique_ptr<TorchSnapshot>> s = BuildTorchSnapshot(trace, seq);
  EXPECT_TRUE(s.ok()) << where << ": " << s.status();
  if (!s.ok()) return Figures();
  EXPECT_FALSE((*s)->estimates.any()) << where << ": the layer calls its extents estimates";
  EXPECT_EQ((*s)->stray_blocks, 0u) << where;
  (*s)->device_traces.clear();
  return SnapshotFigures(ParseOrFail(TorchSnapshotJson(**s), where), where);
}

Blocks TruthBlocks(const JsonValue& checkpoint) {
  Blocks blocks;
  for (const JsonValue& b : checkpoint["active_blocks"].array()) blocks.emplace_back(b[0].uinteger(), b[1].uinteger());
  std::sort(blocks.begin(), blocks.end());
  return blocks;
}

// The sequence number of the one torch.oom event.
uint64_t OomSeq(const JsonValue& events) {
  uint64_t seq = 0;
  int found = 0;
  for (const JsonValue& e : events["events"].array()) {
    if (e["api"].str() == "torch.oom") {
      seq = e["seq"].uinteger();
      ++found;
    }
  }
  EXPECT_EQ(found, 1) << "torch.oom events";
  return seq;
}

// Each checkpoint: the snapshot right before its marker has PyTorch's figures and PyTorch's active blocks.
void ExpectCheckpoints(const std::string& name) {
  const std::string trace = Example(name + ".pb");
  const JsonValue truth = Truth(name + "_truth.json");
  const JsonValue events = Report({"events", trace});
  ASSERT_GE(truth["checkpoints"].array().size(), 1u);
  for (const JsonValue& cp : truth["checkpoints"].array()) {
    const std::string where = name + " at " + cp["name"].str();
    const Figures f = FiguresAt(trace, MarkerSeq(events, cp["marker_size"].uinteger()), where);
    ExpectMemoryStats(f, cp["stats"], where);
    EXPECT_EQ(f.active_blocks, TruthBlocks(cp)) << where << ": the active blocks differ from PyTorch's _snapshot()";
  }
}

class GoldenSnapshotGpt2 : public testing::TestWithParam<std::string> {};

// The same GPT-2 run with the default allocator and with expandable segments: 4 checkpoints each.
TEST_P(GoldenSnapshotGpt2, CheckpointsEqualPyTorchsFigures) { ExpectCheckpoints(GetParam()); }

INSTANTIATE_TEST_SUITE_P(GoldenTorchSnapshot, GoldenSnapshotGpt2,
                         testing::Values("gpt2_blocks_h100", "gpt2_blocks_expandable_h100"));

TEST(GoldenTorchSnapshot, FragmentationOomBeforeAndAfter) {
  ExpectCheckpoints("frag_oom_h100");
  const std::string trace = Example("frag_oom_h100.pb");
  const JsonValue truth = Truth("frag_oom_h100_truth.json");
  const JsonValue events = Report({"events", trace});
  ExpectMemoryStats(FiguresAt(trace, OomSeq(events), "frag_oom after the oom"), truth["after"],
                    "frag_oom after the oom");
}

TEST(GoldenTorchSnapshot, ValidationOomAtTheOom) {
  const std::string trace = Example("story_oom_blocks_h100.pb");
  const JsonValue truth = Truth("story_oom_blocks_h100_truth.json");
  const JsonValue events = Report({"events", trace});
  ExpectMemoryStats(FiguresAt(trace, OomSeq(events), "story_oom at the oom"), truth["memory_stats"],
                    "story_oom at the oom");
}

TEST(GoldenTorchSnapshot, SlowLeakAtTheEndOfTheScript) {
  const std::string trace = Example("story_leak_blocks_h100.pb");
  const JsonValue truth = Truth("story_leak_blocks_h100_truth.json");
  const JsonValue events = Report({"events", trace});
  const int64_t start = events["process"]["start_time_ns"].integer();
  const int64_t last_step = truth["steps"].array().back()["mono_ns"].integer();
  const int64_t written = truth["truth_written_mono_ns"].integer();
  uint64_t seq = 0;
  for (const JsonValue& e : events["events"].array()) {
    const int64_t t = start + e["time_ns"].integer();
    EXPECT_FALSE(t >= last_step && t <= written) << "event " << e["seq"].uinteger() << " while the figures were read";
    if (t < last_step) seq = std::max<uint64_t>(seq, e["seq"].uinteger());
  }
  ASSERT_GT(seq, 0u);
  ExpectMemoryStats(FiguresAt(trace, seq, "story_leak at the end of the script"), truth["memory_stats"],
                    "story_leak at the end of the script");
}

// The command's file at the end of each trace: the shape holds, and reserved is the truth's last reserved figure.
TEST(GoldenTorchSnapshot, EndOfEachTraceThroughTheCommand) {
  const std::pair<const char*, uint64_t> traces[] = {
      {"gpt2_blocks_h100", Stat(Truth("gpt2_blocks_h100_truth.json")["checkpoints"].array().back()["stats"],
                                "reserved_bytes.all.current")},
      {"gpt2_blocks_expandable_h100",
       Stat(Truth("gpt2_blocks_expandable_h100_truth.json")["checkpoints"].array().back()["stats"],
            "reserved_bytes.all.current")},
      {"frag_oom_h100", Stat(Truth("frag_oom_h100_truth.json")["after"], "reserved_bytes.all.current")},
      {"story_oom_blocks_h100",
       Stat(Truth("story_oom_blocks_h100_truth.json")["memory_stats"], "reserved_bytes.all.current")},
      {"story_leak_blocks_h100",
       Stat(Truth("story_leak_blocks_h100_truth.json")["memory_stats"], "reserved_bytes.all.current")},
  };
  const std::string path = ::testing::TempDir() + "/golden_torch_snapshot.json";
  for (const auto& [name, reserved] : traces) {
    const test::ToolResult r = test::Tool({"torch-snapshot", Example(std::string(name) + ".pb"), "-o", path, "--json"});
    ASSERT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_EQ(r.err, "") << name << ": nothing left out, nothing estimated";
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const JsonValue snapshot = ParseOrFail(text.str(), name);
    ASSERT_EQ(snapshot["device_traces"].size(), 1u) << name;
    EXPECT_GT(snapshot["device_traces"][0].size(), 0u) << name;
    EXPECT_EQ(SnapshotFigures(snapshot, name).reserved, reserved) << name;
  }
}

}  // namespace
}  // namespace cumemtrace::analyzer
