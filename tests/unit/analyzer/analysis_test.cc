// Analyze() on the scenario (scenario.cc works out every number): exact peaks, grouping at each peak, leaks,
// failed allocations and pinned windows; and what a cut-off trace still yields.
#include "analyzer/model/analysis.h"

#include "gtest/gtest.h"
#include "tests/unit/analyzer/scenario.h"

namespace cumemtrace::analyzer::test {
namespace {

using format::Kind;

const PeakResult& Peak(const Analysis& a, int32_t device, int series) {
  const PeakResult* p = a.FindPeak(device, series);
  EXPECT_NE(p, nullptr) << device << " " << series;
  static const PeakResult kNone;
  return p != nullptr ? *p : kNone;
}

int K(Kind kind) { return static_cast<int>(kind); }

TEST(Analysis, Scenario) {
  absl::StatusOr<std::unique_ptr<Analysis>> result = Analyze(WriteScenario("scenario.pb"), AnalyzeOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  const Analysis& a = **result;
  EXPECT_FALSE(a.second_pass);  // one read does it all
  EXPECT_EQ(a.info.stats.events, 13u);
  EXPECT_EQ(a.model.overwritten, 0u);  // seq order paired the free of 0x1000 before its reuse
  EXPECT_EQ(a.model.unmatched_frees, 0u);
  EXPECT_EQ(a.model.failed_allocations, 1u);
  EXPECT_EQ(a.info.DurationNs(), 100'000'000);
  EXPECT_EQ(a.info.ThreadName(1), "pt_data_pin");

  // Order: host first (device -1), then device 0 by kind, the total last.
  ASSERT_EQ(a.peaks.size(), 5u);
  EXPECT_EQ(a.peaks[0].device, -1);
  EXPECT_EQ(a.peaks[0].series, K(Kind::kPinnedHost));
  EXPECT_EQ(a.peaks[1].series, K(Kind::kDevice));
  EXPECT_EQ(a.peaks[2].series, K(Kind::kPool));
  EXPECT_EQ(a.peaks[3].series, K(Kind::kAddressReserve));
  EXPECT_EQ(a.peaks[4].series, kDeviceTotalSeries);

  const PeakResult& device = Peak(a, 0, K(Kind::kDevice));
  EXPECT_EQ(device.counter.peak_bytes, 650u);
  EXPECT_EQ(device.counter.peak_count, 3u);
  EXPECT_EQ(device.counter.peak.seq, 5u);
  EXPECT_EQ(device.counter.peak.time_ns, kStartNs + 5'000'000);
  EXPECT_EQ(device.counter.bytes, 350u);
  EXPECT_EQ(device.counter.allocations, 4u);
  ASSERT_EQ(device.at_peak.groups.size(), 2u);
  EXPECT_EQ(device.at_peak.total_bytes, 650u);
  EXPECT_EQ(device.at_peak.groups[0].stack, 3u);
  EXPECT_EQ(device.at_peak.groups[0].bytes, 350u);
  EXPECT_EQ(device.at_peak.groups[0].count, 2u);
  EXPECT_EQ(device.at_peak.groups[1].stack, 2u);
  EXPECT_EQ(device.at_peak.groups[1].bytes, 300u);

  const PeakResult& pool = Peak(a, 0, K(Kind::kPool));
  EXPECT_EQ(pool.counter.peak_bytes, 1000u);
  EXPECT_EQ(pool.counter.peak.seq, 7u);
  ASSERT_EQ(pool.at_peak.groups.size(), 1u);
  EXPECT_EQ(pool.at_peak.groups[0].stack, 2u);

  const PeakResult& total = Peak(a, 0, kDeviceTotalSeries);
  EXPECT_EQ(total.counter.peak_bytes, 1350u);
  EXPECT_EQ(total.counter.peak.seq, 7u);
  ASSERT_EQ(total.at_peak.groups.size(), 2u);
  EXPECT_EQ(total.at_peak.groups[0].bytes, 1000u);
  EXPECT_EQ(total.at_peak.groups[1].bytes, 350u);

  const PeakResult& reserve = Peak(a, 0, K(Kind::kAddressReserve));
  EXPECT_EQ(reserve.counter.peak_bytes, uint64_t{1} << 30);

  const PeakResult& pinned = Peak(a, -1, K(Kind::kPinnedHost));
  EXPECT_EQ(pinned.counter.peak_bytes, 12288u);
  EXPECT_EQ(pinned.counter.peak.seq, 11u);
  ASSERT_EQ(pinned.at_peak.groups.size(), 1u);
  EXPECT_EQ(pinned.at_peak.groups[0].count, 2u);

  // Leaks: memory first, largest first; address space last.
  ASSERT_EQ(a.leaks.size(), 3u);
  EXPECT_EQ(a.leaks[0].kind, Kind::kPinnedHost);
  EXPECT_EQ(a.leaks[0].bytes, 8192u);
  EXPECT_EQ(a.leaks[1].kind, Kind::kDevice);
  EXPECT_EQ(a.leaks[1].bytes, 350u);
  EXPECT_EQ(a.leaks[1].count, 2u);
  EXPECT_EQ(a.leaks[1].stack, 3u);
  EXPECT_EQ(a.leaks[2].kind, Kind::kAddressReserve);
  ASSERT_EQ(a.leak_totals.size(), 3u);  // (-1, pinned), (0, device), (0, address_reserve)

  ASSERT_EQ(a.ooms.size(), 1u);
  const OomRecord& oom = a.ooms[0];
  EXPECT_EQ(oom.event.seq, 9u);
  EXPECT_EQ(oom.event.size, uint64_t{1} << 40);
  EXPECT_EQ(oom.live_bytes, 350u);
  EXPECT_EQ(oom.live_count, 2u);
  ASSERT_TRUE(oom.live_by_stack.taken);
  ASSERT_EQ(oom.live_by_stack.groups.size(), 1u);
  EXPECT_EQ(oom.live_by_stack.groups[0].stack, 3u);
  EXPECT_EQ(oom.live_by_stack.groups[0].bytes, 350u);

  ASSERT_TRUE(a.pinned.computed);
  EXPECT_EQ(a.pinned.peak_bytes, 12288u);
  EXPECT_EQ(a.pinned.peak_time_ns, 10'500'000);
  EXPECT_EQ(a.pinned.window_ns, 1'000'000);
  ASSERT_EQ(a.pinned.windows.size(), 101u);
  EXPECT_EQ(a.pinned.windows[10].rise_bytes, 12288u);
  EXPECT_EQ(a.pinned.windows[10].top_thread, 1u);
  EXPECT_EQ(a.pinned.windows[10].top_stack, 3u);
  EXPECT_EQ(a.pinned.windows[20].rise_bytes, 0u);
  EXPECT_EQ(a.pinned.final_bytes, 8192u);
}

TEST(Analysis, OptionsTurnPartsOff) {
  AnalyzeOptions o;
  o.peak_snapshots = o.oom_snapshots = o.pinned = false;
  absl::StatusOr<std::unique_ptr<Analysis>> result = Analyze(WriteScenario("scenario1.pb"), o);
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE((*result)->second_pass);
  EXPECT_FALSE((*result)->peaks[1].at_peak.taken);
  EXPECT_EQ((*result)->peaks[1].counter.peak_bytes, 650u);
  EXPECT_FALSE((*result)->pinned.computed);
  EXPECT_FALSE((*result)->ooms[0].live_by_stack.taken);
}

TEST(Analysis, PinnedLogOverflowReadsTheTraceAgainWithTheSameResult) {
  const std::string path = WriteScenario("scenario_pinned.pb");
  absl::StatusOr<std::unique_ptr<Analysis>> one = Analyze(path, AnalyzeOptions());
  AnalyzeOptions o;
  o.max_pinned_log = 2;  // the scenario makes 3 pinned changes
  absl::StatusOr<std::unique_ptr<Analysis>> two = Analyze(path, o);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_FALSE((*one)->second_pass);
  EXPECT_TRUE((*two)->second_pass);
  const PinnedResult& p1 = (*one)->pinned;
  const PinnedResult& p2 = (*two)->pinned;
  EXPECT_EQ(p1.peak_bytes, p2.peak_bytes);
  EXPECT_EQ(p1.peak_time_ns, p2.peak_time_ns);
  ASSERT_EQ(p1.windows.size(), p2.windows.size());
  for (size_t i = 0; i < p1.windows.size(); ++i) {
    EXPECT_EQ(p1.windows[i].rise_bytes, p2.windows[i].rise_bytes);
    EXPECT_EQ(p1.windows[i].top_stack, p2.windows[i].top_stack);
  }
  for (size_t i = 0; i < p1.timeline.size(); ++i) EXPECT_EQ(p1.timeline[i].bytes, p2.timeline[i].bytes);
}

TEST(Analysis, CutOffTraceStillYieldsWhatCameBefore) {
  TraceBuilder b = ScenarioTrace(false);
  const std::string bytes = b.bytes();
  // Cut inside the last batch (seq 10..13): the first two batches remain.
  const std::string path = WriteTempFile("scenario_cut.pb", bytes.substr(0, bytes.size() - 5));
  absl::StatusOr<std::unique_ptr<Analysis>> result = Analyze(path, AnalyzeOptions());
  ASSERT_TRUE(result.ok());
  const Analysis& a = **result;
  EXPECT_TRUE(a.info.stats.truncated);
  EXPECT_EQ(a.info.stats.events, 9u);
  EXPECT_EQ(Peak(a, 0, kDeviceTotalSeries).counter.peak_bytes, 1350u);
  EXPECT_EQ(Peak(a, 0, kDeviceTotalSeries).at_peak.groups.size(), 2u);
  EXPECT_EQ(a.FindPeak(-1, K(Kind::kPinnedHost)), nullptr);
  EXPECT_EQ(a.info.DurationNs(), 9'000'000);  // no trailer: the last event ends it
}

TEST(Analysis, OomRecordsKeepTheFirstAndTheLastWithAmortizedSnapshots) {
  // 50 rounds of (a successful allocation, a failed one): the live set grows by one per round.
  TraceBuilder b;
  b.Header();
  std::vector<Ev> events;
  for (uint64_t i = 1; i <= 50; ++i) {
    events.push_back(Alloc(2 * i - 1, static_cast<double>(i), 0x1000 * i, 10, 7));
    Ev e = Alloc(2 * i, static_cast<double>(i), 0, i * 1000, i);
    e.result = 2;
    events.push_back(e);
  }
  b.Events(events);
  AnalyzeOptions o;
  o.max_oom_records = 10;
  o.oom_snapshot_first = 2;
  absl::StatusOr<std::unique_ptr<Analysis>> result = Analyze(b.Write("ooms.pb"), o);
  ASSERT_TRUE(result.ok());
  const Analysis& a = **result;
  EXPECT_EQ(a.oom_count, 50u);
  ASSERT_EQ(a.ooms.size(), 10u);
  EXPECT_EQ(a.ooms[0].event.seq, 2u);
  EXPECT_EQ(a.ooms[4].event.seq, 10u);
  EXPECT_EQ(a.ooms[5].event.seq, 92u);
  EXPECT_EQ(a.ooms[9].event.seq, 100u);
  // The first two always; then when as many events as live allocations went by since the last snapshot: failed
  // allocations 4, 8, 16, 32 (of which 4 is kept here).
  const bool expected[] = {true, true, false, true, false, false, false, false, false, false};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.ooms[i].live_by_stack.taken, expected[i]) << i;
  ASSERT_EQ(a.ooms[3].live_by_stack.groups.size(), 1u);
  EXPECT_EQ(a.ooms[3].live_by_stack.groups[0].count, 4u);
  EXPECT_EQ(a.ooms[3].live_by_stack.total_bytes, 40u);
  EXPECT_EQ(a.ooms[9].live_bytes, 500u);  // live bytes are always exact
}

TEST(Analysis, OomSnapshotsAreSharedWhileNothingChanges) {
  TraceBuilder b;
  b.Header();
  std::vector<Ev> events = {Alloc(1, 1, 0x1000, 10, 7)};
  for (uint64_t i = 2; i <= 20; ++i) {
    Ev e = Alloc(i, 2, 0, 1 << 30, 3);
    e.result = 2;
    events.push_back(e);
  }
  b.Events(events);
  AnalyzeOptions o;
  o.oom_snapshot_first = 1;
  absl::StatusOr<std::unique_ptr<Analysis>> result = Analyze(b.Write("ooms_shared.pb"), o);
  ASSERT_TRUE(result.ok());
  for (const OomRecord& r : (*result)->ooms) {
    ASSERT_TRUE(r.live_by_stack.taken);
    EXPECT_EQ(r.live_by_stack.total_bytes, 10u);
  }
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
