// Reconciliation with the driver's MemorySample packets: each sample is compared with the device memory traced live
// at its after_seq, whatever order the samples have in the file (hand-worked numbers in DriverTrace's comment).
#include "analyzer/model/usage/driver_memory.h"

#include <limits>

#include "analyzer/model/analysis.h"
#include "analyzer/render/text/text_owners.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {
namespace {

using format::Api;

// Events (device-side memory traced live on device 0 / device 1 after each):
//   seq 1  cudaMalloc         dev0 0x1000 1000         dev0 1000
//   seq 2  cudaMalloc         dev0 0x2000 2000         dev0 3000
//   seq 3  cudaFree           dev0 0x1000              dev0 2000
//   seq 4  cudaHostAlloc      host 0x3000  500         (host memory: not device-side)
//   seq 5  cudaMallocManaged  dev0 0x4000 4000         dev0 6000
//   seq 6  cuMemAddressReserve dev0 1 GiB              (address space: not memory)
//   seq 7  cudaFree           dev0 0x2000              dev0 4000
//   seq 8  cudaMalloc         dev1 0x6000  700         dev1 700
// Samples, in file order (total 10000 on device 0, 20000 on device 1), used = total - free:
//   dev0 after 8: free 6000 -> used 4000, traced 4000, unexplained     0   (the last)
//   dev0 after 0: free 9500 -> used  500, traced    0, unexplained   500   (the least used)
//   dev0 after 5: free 2000 -> used 8000, traced 6000, unexplained  2000   (the most used, the most unexplained)
//   dev0 after 2: free 6000 -> used 4000, traced 3000, unexplained  1000   (between seq 1's alloc and its free)
//   dev0 after 7: free 7000 -> used 3000, traced 4000, unexplained -1000   (the least unexplained)
//   dev0 after 3: free 7200 -> used 2800, traced 2000, unexplained   800
//   dev0 after 6: free 3500 -> used 6500, traced 6000, unexplained   500
//   dev1 after 7: free 19000 -> used 1000, traced 0,  unexplained  1000
//   dev1 after 8: free 19000 -> used 1000, traced 700, unexplained  300
//   dev1 after 8: free 18500 -> used 1500, traced 700, unexplained  800   (the last: same after_seq, later in file)
TraceBuilder DriverTrace() {
  TraceBuilder b;
  b.Header().Device(0, "GPU0", 10000).Device(1, "GPU1", 20000);
  b.MemorySample(0, 6000, 10000, 8).MemorySample(0, 9500, 10000, 0);
  b.Events({Alloc(1, 1, 0x1000, 1000), Alloc(2, 2, 0x2000, 2000), Free(3, 3, 0x1000),
            Alloc(4, 4, 0x3000, 500, 0, Api::kCudaHostAlloc, -1)});
  b.MemorySample(0, 2000, 10000, 5).MemorySample(0, 6000, 10000, 2).MemorySample(1, 19000, 20000, 7);
  b.Events({Alloc(5, 5, 0x4000, 4000, 0, Api::kCudaMallocManaged),
            Alloc(6, 6, 0x5000, uint64_t{1} << 30, 0, Api::kCuMemAddressReserve), Free(7, 7, 0x2000),
            Alloc(8, 8, 0x6000, 700, 0, Api::kCudaMalloc, 1)});
  b.MemorySample(0, 7000, 10000, 7).MemorySample(1, 19000, 20000, 8).MemorySample(0, 7200, 10000, 3);
  b.MemorySample(1, 18500, 20000, 8).MemorySample(0, 3500, 10000, 6);
  b.Trailer(8, kStartNs + 10'000'000);
  return b;
}

TEST(DriverMemory, EachSampleAgainstTracedMemoryAtItsAfterSeq) {
  absl::StatusOr<std::unique_ptr<Analysis>> result = Analyze(DriverTrace().Write("driver.pb"), AnalyzeOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  const Analysis& a = **result;
  ASSERT_EQ(a.driver_memory.size(), 2u);
  const DriverMemory& d0 = a.driver_memory[0];
  EXPECT_EQ(d0.device, 0);
  EXPECT_EQ(d0.samples, 7u);
  EXPECT_EQ(d0.total_bytes, 10000u);
  EXPECT_EQ(d0.used_min, 500u);
  EXPECT_EQ(d0.used_max, 8000u);
  EXPECT_EQ(d0.traced_at_max, 6000u);
  EXPECT_EQ(d0.unexplained_at_max, 2000);
  EXPECT_EQ(d0.unexplained_min, -1000);
  EXPECT_EQ(d0.unexplained_max, 2000);
  EXPECT_EQ(d0.unexplained_last, 0);

  const DriverMemory& d1 = a.driver_memory[1];
  EXPECT_EQ(d1.device, 1);
  EXPECT_EQ(d1.samples, 3u);
  EXPECT_EQ(d1.total_bytes, 20000u);
  EXPECT_EQ(d1.used_min, 1000u);
  EXPECT_EQ(d1.used_max, 1500u);
  EXPECT_EQ(d1.traced_at_max, 700u);
  EXPECT_EQ(d1.unexplained_at_max, 800);
  EXPECT_EQ(d1.unexplained_min, 300);
  EXPECT_EQ(d1.unexplained_max, 1000);
  EXPECT_EQ(d1.unexplained_last, 800);
}

TEST(DriverMemory, NoSamplesNoEntries) {
  TraceBuilder b;
  b.Header().Events({Alloc(1, 1, 0x1000, 1000)});
  absl::StatusOr<std::unique_ptr<Analysis>> result = Analyze(b.Write("driver_none.pb"), AnalyzeOptions());
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE((*result)->driver_memory.empty());
}

// The tracker alone, fed by hand: the order of evaluation, and a sample that arrives after the replay passed it.
TEST(DriverMemory, SampleArrivingAfterItsMomentIsTakenAtOnce) {
  StackTable stacks;
  SymbolTable symbols;
  const std::string exe;
  OwnerTracker live(stacks, symbols, exe);
  DriverMemoryTracker tracker;
  auto apply = [&](uint64_t seq, uint64_t size) {
    Event e;
    e.seq = seq;
    e.api = Api::kCudaMalloc;
    e.info = format::FindApi(static_cast<uint32_t>(Api::kCudaMalloc));
    e.size = size;
    Outcome o;
    o.effect = Effect::kAllocated;
    tracker.Before(seq, live);
    live.Apply(e, o);
  };
  MemorySample s;
  s.device = 0;
  s.total_bytes = 1000;
  s.free_bytes = 900;  // used 100
  s.after_seq = 1;
  tracker.Add(s, live);  // waits for the replay to pass seq 1
  apply(1, 10);
  apply(2, 20);          // evaluated before seq 2: traced 10
  s.free_bytes = 800;    // used 200
  s.after_seq = 1;       // already passed: taken now, traced 30
  tracker.Add(s, live);
  const std::vector<DriverMemory> out = tracker.Finish(live);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].samples, 2u);
  EXPECT_EQ(out[0].used_max, 200u);
  EXPECT_EQ(out[0].traced_at_max, 30u);
  EXPECT_EQ(out[0].unexplained_min, 90);
  EXPECT_EQ(out[0].unexplained_max, 170);
  EXPECT_EQ(out[0].unexplained_last, 170);  // same after_seq, later arrival
}

TEST(DriverMemory, HostileSamplesStayInRange) {
  TraceBuilder b;
  b.Header().Events({Alloc(1, 1, 0x1000, 1000)});
  b.MemorySample(0, 0, ~uint64_t{0}, 5);       // used 2^64 - 1: unexplained clamps to the int64 maximum
  b.MemorySample(0, 500, 100, 0);              // free > total: used 0
  absl::StatusOr<std::unique_ptr<Analysis>> result = Analyze(b.Write("driver_hostile.pb"), AnalyzeOptions());
  ASSERT_TRUE(result.ok());
  ASSERT_EQ((*result)->driver_memory.size(), 1u);
  const DriverMemory& d = (*result)->driver_memory[0];
  EXPECT_EQ(d.used_min, 0u);
  EXPECT_EQ(d.used_max, ~uint64_t{0});
  EXPECT_EQ(d.unexplained_max, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(d.unexplained_min, 0);  // traced 0 before seq 1
  EXPECT_EQ(d.unexplained_last, std::numeric_limits<int64_t>::max());
}

// Traced memory above the driver's used figure by 2^63 bytes or more (a damaged sample; the fuzz target found it,
// tests/fuzz/regressions/driver_memory_traced_exceeds_used_by_2p63.pb): the text says by how much without negating
// the int64 minimum.
TEST(DriverMemory, TextOfTheLargestExcessIsItsMagnitude) {
  SummaryReport r;
  DriverMemory d;
  d.used_max = 0;
  d.traced_at_max = uint64_t{1} << 63;
  d.unexplained_at_max = d.unexplained_min = d.unexplained_max = d.unexplained_last =
      std::numeric_limits<int64_t>::min();
  d.samples = 1;
  r.driver_memory.push_back(d);
  std::string text;
  AppendDriverMemoryText(r, &text);
  EXPECT_NE(text.find("traced allocations (8.0 EiB) exceed it by 8.0 EiB"), std::string::npos) << text;
  EXPECT_NE(text.find("unexplained from -8.0 EiB to -8.0 EiB, -8.0 EiB at the last"), std::string::npos) << text;
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
