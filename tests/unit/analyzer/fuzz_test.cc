// The analyzer must never crash, hang or write invalid JSON, whatever the input: random bytes, a real trace with
// random bytes changed, a real trace cut at every byte, and well-formed protobuf with hostile values (cycles in
// the stack tree, extreme sizes, times, ids and devices, unknown apis).
#include <cstdio>
#include <random>
#include <string>

#include "analyzer/model/analysis.h"
#include "analyzer/render/json/json_events.h"
#include "analyzer/render/json/json_reports.h"
#include "analyzer/render/text/text_events.h"
#include "analyzer/render/text/text_reports.h"
#include "analyzer/reports/summary_report.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/json_value.h"
#include "tests/unit/analyzer/scenario.h"

namespace cumemtrace::analyzer::test {
namespace {

// Runs every report on `path` in both formats; checks the JSON parses. Returns whether the trace was readable.
bool RunEverything(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Analysis>> result = Analyze(path, AnalyzeOptions());
  if (!result.ok()) {
    EXPECT_FALSE(result.status().message().empty());
    return false;
  }
  const Analysis& a = **result;
  FrameResolver resolver(a.stacks, a.symbols);
  ReportOptions options;
  options.frames = 64;
  const Overview overview{&a.info, a.model};
  const SummaryReport report = BuildSummaryReport(a, options, resolver);
  std::string json = SummaryJson(overview, report);
  std::string error;
  EXPECT_TRUE(JsonValue::Parse(json, &error).has_value()) << error;
  EXPECT_FALSE(SummaryText(overview, report).empty());
  EXPECT_FALSE(PeakText(overview, report.peak).empty());
  EXPECT_FALSE(LeaksText(overview, report.leaks).empty());
  EXPECT_FALSE(OomText(overview, report.ooms).empty());
  EXPECT_FALSE(PinnedText(overview, report.pinned).empty());
  EXPECT_TRUE(JsonValue::Parse(PeakJson(overview, report.peak)).has_value());
  EXPECT_TRUE(JsonValue::Parse(PinnedJson(overview, report.pinned)).has_value());

  std::FILE* out = std::tmpfile();
  {
    BufferedOutput buffered(out);
    JsonEventSink sink(buffered);
    TraceInfo info;
    EXPECT_TRUE(StreamEvents(path, sink, &info).ok());
  }
  std::rewind(out);
  std::string events;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), out)) > 0) events.append(buf, n);
  std::fclose(out);
  EXPECT_TRUE(JsonValue::Parse(events, &error).has_value()) << error;
  return true;
}

TEST(Fuzz, RandomBytes) {
  std::mt19937_64 rng(1);
  const std::string header = TraceBuilder().Header().bytes();
  for (int i = 0; i < 400; ++i) {
    std::string bytes = (i % 2 == 0) ? header : std::string();
    const size_t n = rng() % 600;
    for (size_t k = 0; k < n; ++k) bytes.push_back(static_cast<char>(rng()));
    // Half of them framed as plausible packets.
    if (i % 4 == 0) bytes.insert(header.size(), "\x0a" + Varint(n));
    RunEverything(WriteTempFile("fuzz_random.pb", bytes));
  }
}

TEST(Fuzz, MutatedScenario) {
  std::mt19937_64 rng(2);
  const std::string original = ScenarioTrace(true).bytes();
  int readable = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    readable += RunEverything(WriteTempFile("fuzz_mutated.pb", bytes));
  }
  EXPECT_GT(readable, 100);  // many mutations land in values, not structure
}

TEST(Fuzz, CutAtEveryByte) {
  const std::string original = ScenarioTrace(true).bytes();
  for (size_t cut = 0; cut <= original.size(); ++cut) {
    const bool readable = RunEverything(WriteTempFile("fuzz_cut.pb", original.substr(0, cut)));
    // Only a file cut inside its header is unreadable.
    if (cut > TraceBuilder().Header().size()) {
      EXPECT_TRUE(readable) << cut;
    }
  }
}

TEST(Fuzz, HostileValues) {
  std::mt19937_64 rng(3);
  const uint64_t extremes[] = {0, 1, 0x7fffffffffffffffull, 0x8000000000000000ull, 0xffffffffffffffffull, 4096};
  auto pick = [&]() -> uint64_t { return rng() % 3 == 0 ? extremes[rng() % 6] : rng() % 64; };
  for (int i = 0; i < 300; ++i) {
    TraceBuilder b;
    format::Header h = TraceBuilder::DefaultHeader();
    h.set_start_time_ns(static_cast<int64_t>(pick()));
    h.set_start_unix_time_ns(static_cast<int64_t>(pick()));
    b.Header(h);
    b.StackNodes(pick(), {pick(), pick(), pick()}, {pick(), pick(), pick()});
    b.StackNodes(1, {2, 3, 1}, {pick(), pick(), pick()});  // a cycle
    b.Strings(static_cast<uint32_t>(pick()), {"_Z" + std::string(rng() % 50, 'N'), "\xff\xfe", ""});
    b.Symbols({pick(), pick()}, {1, 2}, {static_cast<uint32_t>(pick()), 1}, {pick(), pick()});
    b.Module(static_cast<uint32_t>(pick()), "/lib/\x01odd.so", pick(), pick(), pick());
    b.Thread(static_cast<uint32_t>(pick()), -1, std::string("\n\t\"\\", 4));
    b.Device(static_cast<int32_t>(pick()), "gpu\xc3", pick());
    std::vector<Ev> events;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) {
      Ev e;
      e.seq = pick();
      e.time_ns = static_cast<int64_t>(pick());
      const format::ApiInfo& info = format::kApiTable[rng() % std::size(format::kApiTable)];
      e.api = info.api;
      e.device = static_cast<int32_t>(pick());
      e.address = pick();
      e.size = pick();
      e.stack = pick();
      e.thread = static_cast<uint32_t>(pick());
      e.result = rng() % 5 == 0 ? static_cast<int32_t>(pick()) : 0;
      e.has_mem_info = rng() % 2;
      e.free_bytes = pick();
      e.total_bytes = pick();
      events.push_back(e);
    }
    b.Events(events);
    if (rng() % 2) b.Trailer(pick(), static_cast<int64_t>(pick()));
    EXPECT_TRUE(RunEverything(b.Write("fuzz_hostile.pb")));
  }
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
