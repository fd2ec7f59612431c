// UsableCpus: the CPUs the thread may run on, not the machine's; the reader's second thread and the layer's own
// thread follow it.
#include "analyzer/usable_cpus.h"

#include <sched.h>

#include <string>
#include <thread>

#include "analyzer/model/scan_pass.h"
#include "analyzer/reader/trace_reader.h"
#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

// Runs `body` with the calling thread allowed only the first `cpus` CPUs of its mask, then restores the mask.
template <typename Body>
void WithCpus(int cpus, Body body) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  if (CPU_COUNT(&saved) < cpus) GTEST_SKIP() << "this machine lets the test run on fewer than " << cpus << " CPUs";
  cpu_set_t some;
  CPU_ZERO(&some);
  for (int i = 0, taken = 0; i < CPU_SETSIZE && taken < cpus; ++i) {
    if (!CPU_ISSET(i, &saved)) continue;
    CPU_SET(i, &some);
    ++taken;
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(some), &some), 0);
  body();
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
}

TEST(UsableCpus, CountsTheThreadsAffinityMask) {
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  EXPECT_LE(UsableCpus(), static_cast<unsigned>(CPU_COUNT(&mask)));  // a CPU quota may allow fewer
  EXPECT_GE(UsableCpus(), 1u);
  WithCpus(1, [] { EXPECT_EQ(UsableCpus(), 1u); });
}

TEST(UsableCpus, AQuotaAllowsItsCpusRoundedUp) {
  EXPECT_EQ(CpusOfQuota("200000 100000\n"), 2u);
  EXPECT_EQ(CpusOfQuota("150000 100000"), 2u);  // one and a half CPUs: a second thread still gets time
  EXPECT_EQ(CpusOfQuota("50000 100000"), 1u);
  EXPECT_EQ(CpusOfQuota("max 100000\n"), 0u);  // no limit
  EXPECT_EQ(CpusOfQuota("-1 100000"), 0u);      // cgroup v1's "no limit"
  EXPECT_EQ(CpusOfQuota(""), 0u);
  EXPECT_EQ(CpusOfQuota("100000"), 0u);
  EXPECT_EQ(CpusOfQuota("a b"), 0u);
  EXPECT_EQ(CpusOfQuota("100000 0"), 0u);
}

// Sees on which thread the events arrive.
class EventThread : public TraceVisitor {
 public:
  void OnEvents(absl::Span<const Event> events) override {
    if (!events.empty()) on_caller_ = on_caller_ && std::this_thread::get_id() == caller_;
    seen_ = seen_ || !events.empty();
  }
  bool seen() const { return seen_; }
  bool on_caller() const { return on_caller_; }

 private:
  std::thread::id caller_ = std::this_thread::get_id();
  bool on_caller_ = true;
  bool seen_ = false;
};

// With one CPU to run on, the reader hands events over on its own thread; with two, on a second one. (Under a CPU
// quota of one CPU, as in a cgroup with cpu.cfs_quota_us = cpu.cfs_period_us, it stays on one with two as well:
// checked by hand, 2026-11-27.)
TEST(UsableCpus, TheReadersSecondThreadNeedsTwoCpus) {
  const std::string trace = std::string(CUMEMTRACE_EXAMPLES_DIR) + "/gpt2_blocks_h100.pb";
  WithCpus(1, [&] {
    EventThread visitor;
    ASSERT_TRUE(ReadTrace(trace, visitor, nullptr).ok());
    EXPECT_TRUE(visitor.seen());
    EXPECT_TRUE(visitor.on_caller());
  });
  WithCpus(2, [&] {
    if (UsableCpus() < 2) GTEST_SKIP() << "a CPU quota allows this process less than two CPUs";
    EventThread visitor;
    ASSERT_TRUE(ReadTrace(trace, visitor, nullptr).ok());
    EXPECT_TRUE(visitor.seen());
    EXPECT_FALSE(visitor.on_caller());
  });
}

// Three busy threads on two CPUs only take turns: there the reader's thread applies the layer's batches while it
// waits (kShared); on one CPU nothing overlaps, and the layer runs inline. Asked for, a mode is what it is.
TEST(UsableCpus, TheLayersThreadNeedsThreeCpusToRunOn) {
  using Mode = LayerThread::Mode;
  WithCpus(2, [] {
    if (UsableCpus() < 2) GTEST_SKIP() << "a CPU quota allows this process less than two CPUs";
    EXPECT_EQ(ScanPass::LayerThreadMode(LayerThreading::kAuto), Mode::kShared);
    EXPECT_EQ(ScanPass::LayerThreadMode(LayerThreading::kOwnThread), Mode::kOwnThread);
    EXPECT_EQ(ScanPass::LayerThreadMode(LayerThreading::kShared), Mode::kShared);
    EXPECT_EQ(ScanPass::LayerThreadMode(LayerThreading::kInline), Mode::kInline);
  });
  WithCpus(1, [] { EXPECT_EQ(ScanPass::LayerThreadMode(LayerThreading::kAuto), Mode::kInline); });
}

}  // namespace
}  // namespace cumemtrace::analyzer
