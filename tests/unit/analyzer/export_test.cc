// The exports for other viewers, each read back by the rules of the viewer's own parser: folded stacks as
// flamegraph.pl (`^(.*)\s+(\d+(?:\.\d*)?)$`, frames split on ';') and speedscope's folded-stacks importer
// (`^(.*) (\d+)$`) read them; the pprof profile gunzipped and parsed with profile.proto's field numbers (pprof's
// own rules checked: string_table[0] = "", every location and function id defined, values per sample type); the
// Perfetto trace parsed with Perfetto's field numbers (descriptors before use, counter units, instants).
// Numbers come from training_run.h and scenario.cc.
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/strings/str_split.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "analyzer/export/gzip.h"
#include "gtest/gtest.h"
#include "proto/perfetto_trace.pb.h"
#include "proto/pprof_profile.pb.h"
#include "tests/unit/analyzer/scenario.h"
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

pprof::Profile ReadPprof(const std::string& path) {
  absl::StatusOr<std::string> raw = Gunzip(ReadFile(path));
  EXPECT_TRUE(raw.ok()) << raw.status();
  pprof::Profile p;
  EXPECT_TRUE(raw.ok() && p.ParseFromString(*raw));
  return p;
}

TEST_F(Exports, PprofParsesWithProfileProto) {
  const std::string out = ::testing::TempDir() + "/export_b.pb.gz";
  ToolResult r = Tool({"pprof", *b_, "-o", out});
  ASSERT_EQ(r.code, 0) << r.err;
  const pprof::Profile p = ReadPprof(out);
  std::remove(out.c_str());
  ASSERT_GT(p.string_table_size(), 0);
  EXPECT_EQ(p.string_table(0), "");
  auto str = [&](int64_t i) { return i >= 0 && i < p.string_table_size() ? p.string_table(i) : "<bad index>"; };
  ASSERT_EQ(p.sample_type_size(), 4);
  const std::vector<std::string> types = {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(str(p.sample_type(i).type()), types[i]);
  EXPECT_EQ(str(p.sample_type(3).unit()), "bytes");
  EXPECT_EQ(str(p.default_sample_type()), "inuse_space");

  absl::flat_hash_map<uint64_t, const pprof::Location*> locations;
  for (const pprof::Location& l : p.location()) {
    EXPECT_NE(l.id(), 0u);
    EXPECT_TRUE(locations.emplace(l.id(), &l).second) << "duplicate location id";
  }
  absl::flat_hash_map<uint64_t, const pprof::Function*> functions;
  for (const pprof::Function& f : p.function()) functions.emplace(f.id(), &f);
  int64_t sums[4] = {0, 0, 0, 0};
  bool found_leak = false;
  for (const pprof::Sample& s : p.sample()) {
    ASSERT_EQ(s.value_size(), 4);
    for (int i = 0; i < 4; ++i) sums[i] += s.value(i);
    std::vector<std::string> names;
    for (uint64_t id : s.location_id()) {
      ASSERT_TRUE(locations.contains(id));
      for (const pprof::Line& line : locations[id]->line()) {
        ASSERT_TRUE(functions.contains(line.function_id()));
        names.push_back(str(functions[line.function_id()]->name()));
      }
    }
    if (s.value(3) == 1000) {
      found_leak = true;
      // Leaf first: cudaMalloc, keep_loss, <module>; labelled with its timeline.
      EXPECT_EQ(names, (std::vector<std::string>{"cudaMalloc [libcudart.so.13]", "keep_loss", "<module>"}));
      ASSERT_EQ(s.label_size(), 1);
      EXPECT_EQ(str(s.label(0).key()), "timeline");
      EXPECT_EQ(str(s.label(0).str()), "device 0 total");
    }
  }
  EXPECT_TRUE(found_leak);
  EXPECT_EQ(sums[0], 21);                   // 1 model + 10 steps + 10 kept losses
  EXPECT_EQ(sums[1], 900 + 10 * 500 + 10 * 100);
  EXPECT_EQ(sums[2], 12);                   // at the peak: model, one step, ten losses
  EXPECT_EQ(sums[3], 2400);
}

TEST_F(Exports, PprofLeaks) {
  const std::string out = ::testing::TempDir() + "/export_leaks.pb.gz";
  ASSERT_EQ(Tool({"pprof", *b_, "--leaks", "-o", out}).code, 0);
  const pprof::Profile p = ReadPprof(out);
  std::remove(out.c_str());
  int64_t inuse = 0;
  for (const pprof::Sample& s : p.sample()) inuse += s.value(3);
  EXPECT_EQ(inuse, 1900);  // model 900 + losses 1000
  EXPECT_EQ(Tool({"pprof", *b_}).code, 2) << "needs -o";
}

perfetto::Trace ReadPerfetto(const std::string& trace) {
  // One name per process: CTest runs the tests of this file in parallel, and -o never replaces a file.
  const std::string out = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_export.perfetto-trace";
  ToolResult r = Tool({"perfetto", trace, "-o", out});
  EXPECT_EQ(r.code, 0) << r.err;
  perfetto::Trace t;
  EXPECT_TRUE(t.ParseFromString(ReadFile(out)));
  std::remove(out.c_str());
  return t;
}

TEST_F(Exports, PerfettoCountersPerDeviceAndKind) {
  const perfetto::Trace t = ReadPerfetto(*b_);
  ASSERT_GT(t.packet_size(), 0);
  EXPECT_EQ(t.packet(0).sequence_flags(), 1u);  // SEQ_INCREMENTAL_STATE_CLEARED
  EXPECT_TRUE(t.packet(0).track_descriptor().has_process());
  absl::flat_hash_map<uint64_t, std::string> counter_tracks;
  absl::flat_hash_set<uint64_t> tracks = {t.packet(0).track_descriptor().uuid()};
  absl::flat_hash_map<std::string, uint64_t> max_by_name;
  for (const perfetto::TracePacket& p : t.packet()) {
    EXPECT_EQ(p.trusted_packet_sequence_id(), 1u);
    if (p.has_track_descriptor()) {
      const perfetto::TrackDescriptor& d = p.track_descriptor();
      tracks.insert(d.uuid());
      if (d.has_counter()) {
        EXPECT_EQ(d.counter().unit(), perfetto::CounterDescriptor::UNIT_SIZE_BYTES);
        EXPECT_EQ(d.parent_uuid(), t.packet(0).track_descriptor().uuid());
        counter_tracks[d.uuid()] = d.name();
      }
      continue;
    }
    ASSERT_TRUE(p.has_track_event());
    ASSERT_TRUE(tracks.contains(p.track_event().track_uuid())) << "event before its track";
    if (p.track_event().type() == perfetto::TrackEvent::TYPE_COUNTER) {
      const std::string& name = counter_tracks[p.track_event().track_uuid()];
      max_by_name[name] = std::max<uint64_t>(max_by_name[name], p.track_event().counter_value());
      EXPECT_GE(p.timestamp(), static_cast<uint64_t>(kStartNs));
    }
  }
  EXPECT_EQ(max_by_name["device 0 total"], 2400u);
  EXPECT_EQ(max_by_name["device 0 device"], 2400u);
}

TEST(PerfettoExport, FailedAllocationsAreInstants) {
  const perfetto::Trace t = ReadPerfetto(WriteScenario("export_scenario.pb"));
  std::vector<std::string> instants;
  absl::flat_hash_map<std::string, uint64_t> max_by_name;
  absl::flat_hash_map<uint64_t, std::string> names;
  for (const perfetto::TracePacket& p : t.packet()) {
    if (p.has_track_descriptor()) names[p.track_descriptor().uuid()] = p.track_descriptor().name();
    if (!p.has_track_event()) continue;
    const perfetto::TrackEvent& e = p.track_event();
    if (e.type() == perfetto::TrackEvent::TYPE_INSTANT) {
      instants.push_back(names[e.track_uuid()] + ": " + e.name());
      if (names[e.track_uuid()] == "failed allocations") {
        EXPECT_EQ(p.timestamp(), static_cast<uint64_t>(kStartNs + 9'000'000));
        ASSERT_GE(e.debug_annotations_size(), 1);
        EXPECT_EQ(e.debug_annotations(0).name(), "requested_bytes");
        EXPECT_EQ(e.debug_annotations(0).uint_value(), uint64_t{1} << 40);
      }
    } else {
      max_by_name[names[e.track_uuid()]] = std::max<uint64_t>(max_by_name[names[e.track_uuid()]], e.counter_value());
    }
  }
  EXPECT_NE(std::find(instants.begin(), instants.end(),
                      "failed allocations: OOM: cudaMalloc 1.0 TiB on device 0 (CUDA_ERROR_OUT_OF_MEMORY)"),
            instants.end());
  EXPECT_EQ(max_by_name["device 0 total"], 1350u);
  EXPECT_EQ(max_by_name["device 0 pool"], 1000u);
  EXPECT_EQ(max_by_name["host pinned_host"], 12288u);
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
