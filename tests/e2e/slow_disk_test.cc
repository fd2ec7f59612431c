// A slow disk stalls the flush thread, not the program: with every write(2) of the trace delayed by 400 ms (the
// e2e_slow_write shim, preloaded before the preload), a program that fills a batch of 8192 events more slowly than
// the disk writes one never waits for a write after its first call: no later alloc/free pair takes half the delay, no
// recording thread had to write sealed batches itself (stalled_seals 0), and the trace is complete. The first call
// starts tracing and writes the header on its own thread, by design (a trace file that exists starts with its
// header, even a forked child's that ends with _exit at once): it takes the delay once. The preload before the
// output queue wrote each full batch on the thread that filled it, so one pair in 4096 took the whole delay.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "e2e_support.h"

namespace cumemtrace::e2e {
namespace {

constexpr int kPairs = 12288;     // 24 576 events: three full batches
constexpr int kSleepUs = 100;     // a batch every ~0.6-1 s here, more slowly than the disk writes one
constexpr int kWriteDelayMs = 400;

TEST(E2eSlowDisk, TheProgramNeverWaitsForTheTraceToBeWritten) {
  const std::string preload =
      std::string(E2E_PROGRAM_DIR) + "/libe2e_slow_write.so:" + std::string(E2E_PRELOAD);
  const RunResult run = RunProgram({.program = "storm",
                                    .env = {{"LD_PRELOAD", preload},
                                            {"SLOW_WRITE_MS", std::to_string(kWriteDelayMs)},
                                            {"FAKE_CUDA_LEDGER", ""}},
                                    .timeout_s = 120,
                                    .args = {"latency", std::to_string(kPairs), std::to_string(kSleepUs)}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::ifstream in(run.dir + "/latency.txt");
  long pairs = 0;
  long long first_ns = -1, slowest_ns = -1;
  in >> pairs >> first_ns >> slowest_ns;
  ASSERT_EQ(pairs, kPairs) << run.Describe();

  const CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  ASSERT_TRUE(trace.stats.has_trailer);
  EXPECT_EQ(trace.events.size(), 2u * kPairs);
  EXPECT_EQ(trace.trailer.dropped_events, 0u);
  EXPECT_GE(trace.trailer.flushes, 3u);
  EXPECT_EQ(trace.trailer.stalled_seals, 0u);
  // Each write took at least the delay, whichever thread made it.
  EXPECT_GE(trace.trailer.writer_time_ns, 3ull * kWriteDelayMs * 1000000);
  EXPECT_GE(first_ns, kWriteDelayMs * 1000000ll) << "the header was not written by the first call";
  EXPECT_LT(slowest_ns, kWriteDelayMs / 2 * 1000000ll) << "a pair waited for a write of the trace";
  RecordProperty("first_pair_ns", std::to_string(first_ns));
  RecordProperty("slowest_later_pair_ns", std::to_string(slowest_ns));
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

}  // namespace
}  // namespace cumemtrace::e2e
