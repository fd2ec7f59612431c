// `cumem-analyze ranks` end to end through RunCli, and the summary's owner and driver sections in JSON and text:
// ordering by rank, the spread of device peaks, owners at each peak, and one line naming a bad trace.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "analyzer/commands/run_cli.h"
#include "analyzer/commands/command.h"
#include "analyzer/commands/command_line.h"
#include "analyzer/render/json/json_common.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/json_value.h"
#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {
namespace {

using format::Api;


enum : uint32_t { kCuda = 1, kC10Cuda, kNccl };

// A rank's trace: modules libcuda, libc10_cuda and libnccl; stack P (PyTorch) = 3, N (NCCL) = 6.
TraceBuilder RankTrace(int32_t rank, int32_t pid, const std::string& host) {
  TraceBuilder b;
  b.Header(TraceBuilder::RankHeader(rank, rank < 0 ? -1 : rank % 2, rank < 0 ? -1 : 4, pid, host));
  b.Device(0, "GPU", 80'000'000'000);
  b.NamedModule(kCuda, "/usr/lib/libcuda.so.1")
      .NamedModule(kC10Cuda, "/venv/torch/lib/libc10_cuda.so")
      .NamedModule(kNccl, "/venv/nvidia/nccl/lib/libnccl.so.2");
  uint64_t p = 0, n = 0;
  b.Stack(1, {TraceBuilder::PcIn(kCuda), TraceBuilder::PcIn(kC10Cuda)}, &p);
  b.Stack(4, {TraceBuilder::PcIn(kCuda), TraceBuilder::PcIn(kNccl), TraceBuilder::PcIn(kC10Cuda)}, &n);
  EXPECT_EQ(p, 2u);
  EXPECT_EQ(n, 6u);
  return b;
}

// Four traces given in this order:
//   r1.pb  rank 1, pid 300: dev0 PyTorch 2000 + NCCL 1000 (peak 3000 at 2 ms), then PyTorch freed; NCCL leaks
//          1000; one failed allocation.
//   r0.pb  rank 0, pid 200: dev0 PyTorch 1500 (peak at 1 ms, leaked).
//   p7.pb  no rank, pid 7: dev1 NCCL 2000 (peak at 5 ms), freed.
//   p5.pb  no rank, pid 5: pinned host memory only (no device).
// By rank: r0, r1, then p5, p7 by pid. Device peaks 3000, 1500, 2000: max 3000 (rank 1), min 1500 (rank 0), 2.0.
struct RankFiles {
  std::string r1, r0, p7, p5;
};

// Named per process: ctest runs the tests that write them as parallel processes.
std::string Unique(const std::string& name) { return std::to_string(getpid()) + "_" + name; }

RankFiles WriteRankTraces() {
  RankFiles f;
  Ev fail = Alloc(4, 4, 0, uint64_t{1} << 40, 2);
  fail.result = 2;
  f.r1 = RankTrace(1, 300, "node-b")
             .Events({Alloc(1, 1, 0x1000, 2000, 2), Alloc(2, 2, 0x2000, 1000, 6), Free(3, 3, 0x1000), fail})
             .Trailer(4, kStartNs + 10'000'000)
             .Write(Unique("rank1.pb"));
  f.r0 = RankTrace(0, 200, "node-a").Events({Alloc(1, 1, 0x1000, 1500, 2)}).Trailer(1, kStartNs + 10'000'000)
             .Write(Unique("rank0.pb"));
  f.p7 = RankTrace(-1, 7, "node-c")
             .Events({Alloc(1, 5, 0x1000, 2000, 6, Api::kCudaMalloc, 1), Free(2, 6, 0x1000, Api::kCudaFree, 1)})
             .Trailer(2, kStartNs + 10'000'000)
             .Write(Unique("pid7.pb"));
  f.p5 = RankTrace(-1, 5, "node-c")
             .Events({Alloc(1, 1, 0x1000, 4096, 2, Api::kCudaHostAlloc, -1)})
             .Trailer(1, kStartNs + 10'000'000)
             .Write(Unique("pid5.pb"));
  return f;
}

TEST(Ranks, JsonSortedByRankWithSpreadAndOwnersAtPeak) {
  const RankFiles f = WriteRankTraces();
  ToolResult r = Tool({"ranks", f.r1, f.r0, f.p7, f.p5, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  JsonValue j = Json(r);
  EXPECT_EQ(j["schema_version"].integer(), kJsonSchemaVersion);
  const JsonValue& ranks = j["ranks"];
  ASSERT_EQ(ranks.size(), 4u);
  EXPECT_EQ(ranks[0]["path"].str(), f.r0);
  EXPECT_EQ(ranks[1]["path"].str(), f.r1);
  EXPECT_EQ(ranks[2]["path"].str(), f.p5);
  EXPECT_EQ(ranks[3]["path"].str(), f.p7);

  const JsonValue& r1 = ranks[1];
  for (const char* key : {"path", "rank", "local_rank", "world_size", "hostname", "pid", "events",
                          "failed_allocations", "leaked_bytes", "devices"}) {
    EXPECT_TRUE(r1.has(key)) << key;
  }
  EXPECT_EQ(r1["rank"].integer(), 1);
  EXPECT_EQ(r1["local_rank"].integer(), 1);
  EXPECT_EQ(r1["world_size"].integer(), 4);
  EXPECT_EQ(r1["hostname"].str(), "node-b");
  EXPECT_EQ(r1["pid"].integer(), 300);
  EXPECT_EQ(r1["events"].uinteger(), 4u);
  EXPECT_EQ(r1["failed_allocations"].uinteger(), 1u);
  EXPECT_EQ(r1["leaked_bytes"].uinteger(), 1000u);
  ASSERT_EQ(r1["devices"].size(), 1u);
  const JsonValue& d = r1["devices"][0];
  EXPECT_EQ(d["device"].integer(), 0);
  EXPECT_EQ(d["peak_bytes"].uinteger(), 3000u);
  EXPECT_EQ(d["peak_time_ns"].integer(), 2'000'000);
  ASSERT_EQ(d["owners_at_peak"].size(), 2u);
  EXPECT_EQ(d["owners_at_peak"][0]["owner"].str(), "pytorch");
  EXPECT_EQ(d["owners_at_peak"][0]["bytes"].uinteger(), 2000u);
  EXPECT_EQ(d["owners_at_peak"][1]["owner"].str(), "nccl");
  EXPECT_EQ(d["owners_at_peak"][1]["bytes"].uinteger(), 1000u);

  EXPECT_EQ(ranks[0]["leaked_bytes"].uinteger(), 1500u);
  EXPECT_EQ(ranks[0]["local_rank"].integer(), 0);
  EXPECT_TRUE(ranks[2]["rank"].is_null());
  EXPECT_TRUE(ranks[2]["local_rank"].is_null());
  EXPECT_TRUE(ranks[2]["world_size"].is_null());
  EXPECT_EQ(ranks[2]["devices"].size(), 0u);  // pinned host memory only
  EXPECT_EQ(ranks[2]["leaked_bytes"].uinteger(), 4096u);
  EXPECT_EQ(ranks[3]["devices"][0]["device"].integer(), 1);
  EXPECT_EQ(ranks[3]["devices"][0]["peak_bytes"].uinteger(), 2000u);
  EXPECT_EQ(ranks[3]["devices"][0]["owners_at_peak"][0]["owner"].str(), "nccl");
  EXPECT_EQ(ranks[3]["leaked_bytes"].uinteger(), 0u);

  const JsonValue& s = j["spread"];
  EXPECT_EQ(s["device_peak_max"].uinteger(), 3000u);
  EXPECT_EQ(s["device_peak_min"].uinteger(), 1500u);
  EXPECT_DOUBLE_EQ(s["max_over_min"].number(), 2.0);
}

TEST(Ranks, Text) {
  const RankFiles f = WriteRankTraces();
  ToolResult r = Tool({"ranks", f.r1, f.r0, f.p7, f.p5});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Ranks: 4 traces"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pytorch 2.0 KiB, nccl 1000 B"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Spread: device peaks from 1.5 KiB (rank 0, device 0) to 2.9 KiB (rank 1, device 0); "
                       "max/min 2.00"),
            std::string::npos)
      << r.out;
  // Rows in rank order.
  EXPECT_LT(r.out.find(f.r0), r.out.find(f.r1));
  EXPECT_LT(r.out.find(f.r1), r.out.find(f.p5));
  EXPECT_LT(r.out.find(f.p5), r.out.find(f.p7));
}

TEST(Ranks, BadOrMissingTraceIsOneLineNamingItExit2) {
  const RankFiles f = WriteRankTraces();
  const std::string bad = WriteTempFile(Unique("rank_bad.pb"), "this is not a trace");
  for (const std::string& wrong : {bad, ::testing::TempDir() + "/" + Unique("rank_missing.pb")}) {
    ToolResult r = Tool({"ranks", f.r0, wrong, "--json"});
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(wrong), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  ToolResult usage = Tool({"ranks"});
  EXPECT_EQ(usage.code, 2);
  EXPECT_NE(usage.err.find("missing the trace files after 'ranks'"), std::string::npos) << usage.err;
}

TEST(Ranks, CommandLineTakesEveryTrace) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine({"ranks", "a.pb", "--json", "b.pb", "c.pb"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_STREQ(cl->command->name, "ranks");
  EXPECT_TRUE(cl->json);
  EXPECT_EQ(cl->traces, (std::vector<std::string>{"a.pb", "b.pb", "c.pb"}));
  EXPECT_EQ(cl->trace, "a.pb");
}

TEST(SummaryOwners, JsonAndText) {
  const std::string path = RankTrace(1, 300, "node-b")
                               .Events({Alloc(1, 1, 0x1000, 2000, 2), Alloc(2, 2, 0x2000, 1000, 6),
                                        Free(3, 3, 0x1000)})
                               .MemorySample(0, 80'000'000'000 - 5000, 80'000'000'000, 2)
                               .MemorySample(0, 80'000'000'000 - 1500, 80'000'000'000, 3)
                               .Trailer(3, kStartNs + 10'000'000)
                               .Write(Unique("summary_owners.pb"));
  ToolResult r = Tool({path, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  JsonValue j = Json(r);
  const JsonValue& owners = j["owners"];
  ASSERT_EQ(owners.size(), 2u);
  EXPECT_EQ(owners[0]["device"].integer(), 0);
  EXPECT_EQ(owners[0]["owner"].str(), "pytorch");
  EXPECT_EQ(owners[0]["display_name"].str(), "PyTorch (caching allocator)");
  EXPECT_EQ(owners[0]["allocations"].uinteger(), 1u);
  EXPECT_EQ(owners[0]["bytes_allocated"].uinteger(), 2000u);
  EXPECT_EQ(owners[0]["peak_bytes"].uinteger(), 2000u);
  EXPECT_EQ(owners[0]["bytes_at_device_peak"].uinteger(), 2000u);
  EXPECT_EQ(owners[0]["live_bytes_at_end"].uinteger(), 0u);
  EXPECT_EQ(owners[1]["owner"].str(), "nccl");
  EXPECT_EQ(owners[1]["live_bytes_at_end"].uinteger(), 1000u);
  const JsonValue& driver = j["driver_memory"];
  ASSERT_EQ(driver.size(), 1u);
  EXPECT_EQ(driver[0]["device"].integer(), 0);
  EXPECT_EQ(driver[0]["samples"].uinteger(), 2u);
  EXPECT_EQ(driver[0]["total_bytes"].uinteger(), 80'000'000'000u);
  EXPECT_EQ(driver[0]["used_min"].uinteger(), 1500u);
  EXPECT_EQ(driver[0]["used_max"].uinteger(), 5000u);
  EXPECT_EQ(driver[0]["traced_at_max"].uinteger(), 3000u);
  EXPECT_EQ(driver[0]["unexplained_at_max"].integer(), 2000);
  EXPECT_EQ(driver[0]["unexplained_min"].integer(), 500);
  EXPECT_EQ(driver[0]["unexplained_max"].integer(), 2000);
  EXPECT_EQ(driver[0]["unexplained_last"].integer(), 500);

  ToolResult text = Tool({path});
  ASSERT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("driver, device 0: 4.9 KiB used at most; traced allocations explain 2.9 KiB of it; "
                          "2.0 KiB is context, other processes or untraced memory"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("PyTorch (caching allocator)"), std::string::npos) << text.out;

  const std::string plain =
      RankTrace(0, 1, "h").Events({Alloc(1, 1, 0x1000, 10, 2)}).Trailer(1, kStartNs).Write(Unique("summary_plain.pb"));
  ToolResult none = Tool({plain});
  EXPECT_NE(none.out.find("driver: the trace has no memory samples"), std::string::npos) << none.out;
  ToolResult none_json = Tool({plain, "--json"});
  EXPECT_EQ(Json(none_json)["driver_memory"].size(), 0u);
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
