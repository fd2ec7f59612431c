// Backward passes and the graph-retention judgement (model/torch/autograd_passes.h) on hand-made allocation
// sequences: a training loop, an evaluation loop after it with and without no_grad, a running total that keeps
// every step's graph, blocks without a grad mode. Exact bytes and counts.
#include "analyzer/model/torch/autograd_passes.h"

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

using format::Api;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kForward = 1, kEval = 2, kGrad = 3, kMetric = 4, kParams = 5;

class Trace {
 public:
  // A block allocated by the program's own thread, with or without autograd recording.
  AutogradTensor Forward(uint64_t stack, uint64_t size, bool recording = true, uint32_t thread = kMain) {
    AutogradStamp s =
        passes_.OnBlockAlloc(recording ? Api::kTorchAllocGrad : Api::kTorchAllocNoGrad, false, thread, stack);
    return {stack, size, s};
  }
  // A block allocated by autograd's engine (a backward pass).
  AutogradTensor Backward(uint64_t stack, uint64_t size) {
    AutogradStamp s = passes_.OnBlockAlloc(Api::kTorchAllocNoGrad, true, kEngine, stack);
    return {stack, size, s};
  }
  static constexpr uint32_t kMain = 1, kEngine = 2, kPrefetcher = 3;
  GraphRetention Judge(const std::vector<AutogradTensor>& live) const {
    return passes_.JudgeRetention(live, passes_.passes());
  }
  AutogradPasses& passes() { return passes_; }

 private:
  AutogradPasses passes_;
};

TEST(AutogradPasses, EngineThreadsAreNamedByPyTorch) {
  EXPECT_TRUE(IsAutogradEngineThread("pt_autograd_0"));
  EXPECT_TRUE(IsAutogradEngineThread("pt_autograd_12"));
  EXPECT_FALSE(IsAutogradEngineThread("python3"));
  EXPECT_FALSE(IsAutogradEngineThread("pt_data_pin"));
}

TEST(AutogradPasses, APassBeginsWhenTheEngineAllocatesAfterTheProgram) {
  Trace run;
  AutogradTensor params = run.Forward(kParams, 10 * kMiB);
  EXPECT_EQ(params.stamp.epoch, 0u);
  for (int step = 0; step < 3; ++step) {
    run.Forward(kForward, kMiB);
    AutogradTensor g1 = run.Backward(kGrad, kMiB);
    AutogradTensor g2 = run.Backward(kGrad, kMiB);  // the same pass
    EXPECT_TRUE(g1.stamp.backward);
    EXPECT_EQ(g1.stamp.epoch, static_cast<uint32_t>(step + 1));
    EXPECT_EQ(g2.stamp.epoch, g1.stamp.epoch);
    run.Forward(kForward, kMiB, /*recording=*/false);  // the optimizer's step, under no_grad
  }
  EXPECT_EQ(run.passes().passes(), 3u);
  EXPECT_TRUE(run.passes().grad_known());
}

// An evaluation loop without no_grad after training keeps each batch's graph: its tensors were made while recording,
// after the last pass, by code no pass ever followed.
TEST(AutogradPasses, EvaluationWithoutNoGradIsUnfollowed) {
  Trace run;
  std::vector<AutogradTensor> live = {run.Forward(kParams, 100 * kMiB)};
  for (int step = 0; step < 2; ++step) {
    run.Forward(kForward, 10 * kMiB);
    run.Backward(kGrad, 10 * kMiB);
  }
  for (int batch = 0; batch < 5; ++batch) live.push_back(run.Forward(kEval, 20 * kMiB));
  const GraphRetention r = run.Judge(live);
  EXPECT_TRUE(r.grad_known);
  EXPECT_EQ(r.backward_passes, 2u);
  EXPECT_EQ(r.live_bytes, 200 * kMiB);
  EXPECT_EQ(r.recording_bytes, 200 * kMiB);
  EXPECT_EQ(r.unfollowed_bytes, 100 * kMiB);
  EXPECT_EQ(r.unfollowed_count, 5u);
  ASSERT_EQ(r.unfollowed.size(), 1u);
  EXPECT_EQ(r.unfollowed[0].stack, kEval);
  EXPECT_EQ(r.kept_bytes, 0u);
}

// The same loop under no_grad: nothing recorded, nothing to say.
TEST(AutogradPasses, EvaluationUnderNoGradIsNotReported) {
  Trace run;
  std::vector<AutogradTensor> live;
  run.Forward(kForward, 10 * kMiB);
  run.Backward(kGrad, 10 * kMiB);
  for (int batch = 0; batch < 5; ++batch) live.push_back(run.Forward(kEval, 20 * kMiB, /*recording=*/false));
  const GraphRetention r = run.Judge(live);
  EXPECT_EQ(r.recording_bytes, 0u);
  EXPECT_EQ(r.unfollowed_bytes, 0u);
  EXPECT_EQ(r.kept_bytes, 0u);
}

// A training step's own activations at its peak were followed by backward passes in earlier steps: not unfollowed.
TEST(AutogradPasses, ATrainingStepsActivationsAreNotUnfollowed) {
  Trace run;
  for (int step = 0; step < 3; ++step) {
    run.Forward(kForward, 10 * kMiB);
    run.Backward(kGrad, 10 * kMiB);
  }
  std::vector<AutogradTensor> live = {run.Forward(kForward, 10 * kMiB), run.Forward(kForward, 10 * kMiB)};
  const GraphRetention r = run.Judge(live);
  EXPECT_EQ(r.unfollowed_bytes, 0u);
  EXPECT_EQ(r.kept_bytes, 0u);
}

// A metric kept as a running total of a tensor: one line's tensors outlive pass after pass.
TEST(AutogradPasses, TensorsOutlivingPassesStepAfterStepAreKept) {
  Trace run;
  std::vector<AutogradTensor> live = {run.Forward(kParams, 100 * kMiB)};
  for (int step = 0; step < 6; ++step) {
    run.Forward(kForward, 10 * kMiB);
    run.Backward(kGrad, 10 * kMiB);
    live.push_back(run.Forward(kMetric, 4 * kMiB));  // after the pass: survives the next ones
  }
  const GraphRetention r = run.Judge(live);
  EXPECT_EQ(r.backward_passes, 6u);
  // The last step's metric was made after the last pass: it has outlived none yet.
  EXPECT_EQ(r.kept_bytes, 20 * kMiB);
  EXPECT_EQ(r.kept_count, 5u);
  ASSERT_EQ(r.kept.size(), 1u);
  EXPECT_EQ(r.kept[0].stack, kMetric);
  EXPECT_EQ(r.kept[0].first_epoch, 1u);
  EXPECT_EQ(r.kept[0].last_epoch, 5u);
  EXPECT_EQ(r.kept[0].epochs, 5u);
  // Parameters survive every pass too, but from one step only: not growth.
  for (const RetentionStack& s : r.kept) EXPECT_NE(s.stack, kParams);
}

// At an earlier moment (a peak) only the passes begun by then count as outlived.
TEST(AutogradPasses, AMomentJudgesWithThePassesBegunByThen) {
  Trace run;
  std::vector<AutogradTensor> live;
  for (int step = 0; step < 4; ++step) {
    run.Forward(kForward, kMiB);
    run.Backward(kGrad, kMiB);
    live.push_back(run.Forward(kMetric, kMiB));
  }
  EXPECT_EQ(run.passes().JudgeRetention(live, 4).kept_count, 3u);
  EXPECT_EQ(run.passes().JudgeRetention(live, 2).kept_count, 0u);  // by then at most one pass apart
}

TEST(AutogradPasses, BlocksWithoutAGradModeAreNeverJudged) {
  AutogradPasses passes;
  std::vector<AutogradTensor> live;
  for (int i = 0; i < 5; ++i) {
    live.push_back({kEval, kMiB, passes.OnBlockAlloc(Api::kTorchAlloc, false, 1, kEval)});
  }
  passes.OnBlockAlloc(Api::kTorchAlloc, true, 2, kGrad);
  const GraphRetention r = passes.JudgeRetention(live, passes.passes());
  EXPECT_FALSE(r.grad_known);
  EXPECT_EQ(r.recording_bytes, 0u);
  EXPECT_EQ(r.unfollowed_bytes, 0u);
  EXPECT_EQ(r.kept_bytes, 0u);
}

// Another thread of the program allocating during a backward pass (a data prefetcher) does not split the pass.
TEST(AutogradPasses, AnotherThreadAllocatingDoesNotSplitAPass) {
  Trace run;
  run.Forward(kForward, kMiB);
  run.Backward(kGrad, kMiB);
  run.Forward(kEval, kMiB, /*recording=*/true, Trace::kPrefetcher);
  run.Backward(kGrad, kMiB);
  EXPECT_EQ(run.passes().passes(), 1u);
  run.Forward(kForward, kMiB);  // the thread that started it: the pass is over
  run.Backward(kGrad, kMiB);
  EXPECT_EQ(run.passes().passes(), 2u);
}

// Three tensors of one line from two epochs are not growth from step to step.
TEST(AutogradPasses, KeptNeedsThreeDistinctEpochs) {
  Trace run;
  std::vector<AutogradTensor> live;
  for (int step = 0; step < 4; ++step) {
    run.Forward(kForward, kMiB);
    if (step == 1 || step == 3) {
      live.push_back(run.Forward(kMetric, kMiB));
      live.push_back(run.Forward(kMetric, kMiB));
    }
    run.Backward(kGrad, kMiB);
  }
  run.Forward(kForward, kMiB);
  const GraphRetention r = run.Judge(live);
  EXPECT_EQ(r.kept_bytes, 0u);  // 4 tensors, epochs 1 and 3 only
}

// The engine's live tensors are listed by stack for attribution, whatever their grad mode.
TEST(AutogradPasses, TheEnginesTensorsAreListedByStack) {
  Trace run;
  run.Forward(kForward, kMiB);
  std::vector<AutogradTensor> live = {run.Backward(kGrad, 3 * kMiB), run.Backward(kGrad, kMiB),
                                      run.Backward(kMetric, kMiB)};
  const GraphRetention r = run.Judge(live);
  EXPECT_EQ(r.backward_bytes, 5 * kMiB);
  ASSERT_EQ(r.backward.size(), 2u);
  EXPECT_EQ(r.backward[0].stack, kGrad);
  EXPECT_EQ(r.backward[0].bytes, 4 * kMiB);
  EXPECT_EQ(r.backward[0].count, 2u);
}

}  // namespace
}  // namespace cumemtrace::analyzer
