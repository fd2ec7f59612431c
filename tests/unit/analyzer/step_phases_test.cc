// Training and validation told apart by backward passes (model/torch/step_phases.h), on hand-made allocation
// sequences: a training loop with validation twice, one without validation, validation too early to tell, an
// optimizer step every few micro-batches, a short stretch of rare code. Exact transitions.
#include "analyzer/model/torch/step_phases.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

constexpr uint64_t kForwardStacks = 100, kOptimizerStacks = 200, kEvalStacks = 300, kLogStacks = 400;

class TrainingRun {
 public:
  // The program's requests at stacks [first, first + n), in order; returns the seq of the first. With
  // `new_segment`, the first request makes a driver allocation and a segment row before its block.
  uint64_t Allocs(uint64_t first_stack, int n, bool new_segment = false) {
    const uint64_t boundary = seq_;
    if (new_segment) seq_ += 2;
    const uint64_t first = seq_ + 1;
    for (int i = 0; i < n; ++i) {
      ++seq_;
      detector_.OnProgramRequest(seq_, i == 0 ? boundary : seq_ - 1, static_cast<int64_t>(seq_) * 1000, 1,
                                 first_stack + i, epoch_, false);
    }
    return first;
  }
  // A request that ran out of memory.
  void Oom(uint64_t stack) {
    ++seq_;
    detector_.OnProgramRequest(seq_, seq_ - 1, static_cast<int64_t>(seq_) * 1000, 1, stack, epoch_, true);
  }
  // A training step: forward, backward (the engine's allocations are not the program's: only the epoch moves),
  // then the optimizer unless `accumulate`.
  void TrainStep(bool accumulate = false) {
    Allocs(kForwardStacks, 50);
    ++epoch_;
    seq_ += 30;  // the backward pass's own allocations
    if (!accumulate) Allocs(kOptimizerStacks, 10);
  }
  uint64_t seq() const { return seq_; }
  std::vector<PhaseInfo> Finish() { return detector_.Finish(epoch_, 0); }

 private:
  StepPhaseDetector detector_;
  uint64_t seq_ = 0;
  uint32_t epoch_ = 0;
};

// "push NAME@after_seq" / "pop@after_seq".
std::vector<std::string> Describe(const std::vector<PhaseInfo>& transitions) {
  std::vector<std::string> out;
  for (const PhaseInfo& p : transitions) {
    EXPECT_EQ(p.domain, kDetectedPhaseDomain);
    out.push_back(p.kind == format::PhaseKind::kPush ? "push " + p.name + "@" + std::to_string(p.after_seq)
                                                     : "pop@" + std::to_string(p.after_seq));
  }
  return out;
}

TEST(StepPhases, ValidationBetweenTrainingIsFoundTwice) {
  TrainingRun run;
  for (int i = 0; i < 20; ++i) run.TrainStep();
  const uint64_t eval1 = run.Allocs(kEvalStacks, 40);
  run.Allocs(kEvalStacks, 40);  // a second batch: same code, same epoch
  const uint64_t eval1_end = run.seq();
  const uint64_t train2 = run.seq() + 1;
  for (int i = 0; i < 20; ++i) run.TrainStep();
  const uint64_t eval2 = run.Allocs(kEvalStacks, 40);
  const uint64_t eval2_end = run.seq();
  EXPECT_EQ(Describe(run.Finish()),
            (std::vector<std::string>{"push train@0", "pop@" + std::to_string(eval1 - 1),
                                      "push validate@" + std::to_string(eval1 - 1), "pop@" + std::to_string(eval1_end),
                                      "push train@" + std::to_string(train2 - 1), "pop@" + std::to_string(eval2 - 1),
                                      "push validate@" + std::to_string(eval2 - 1),
                                      "pop@" + std::to_string(eval2_end)}));
}

TEST(StepPhases, TrainingThatResumesAfterTheLastValidationEndsWithTheTrace) {
  TrainingRun run;
  for (int i = 0; i < 10; ++i) run.TrainStep();
  const uint64_t eval = run.Allocs(kEvalStacks, 40);
  const uint64_t eval_end = run.seq();
  for (int i = 0; i < 3; ++i) run.TrainStep();
  const std::vector<std::string> got = Describe(run.Finish());
  ASSERT_EQ(got.size(), 5u);  // the last range stays open: the tracker ends it with the trace
  EXPECT_EQ(got[2], "push validate@" + std::to_string(eval - 1));
  EXPECT_EQ(got[3], "pop@" + std::to_string(eval_end));
  EXPECT_EQ(got[4], "push train@" + std::to_string(eval_end));
}

// Validation's first request needed a new segment: its driver and segment rows come before its block, and belong to
// validation (the range begins before them), not to training.
TEST(StepPhases, ARequestsSegmentRowsBelongToItsPhase) {
  TrainingRun run;
  for (int i = 0; i < 10; ++i) run.TrainStep();
  const uint64_t before_segment = run.seq();
  const uint64_t eval = run.Allocs(kEvalStacks, 40, /*new_segment=*/true);
  ASSERT_EQ(eval, before_segment + 3);
  const std::vector<std::string> got = Describe(run.Finish());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[1], "pop@" + std::to_string(before_segment));
  EXPECT_EQ(got[2], "push validate@" + std::to_string(before_segment));
}

// A validation that ran out of memory at its first batch is validation, however few requests it made.
TEST(StepPhases, AValidationThatDiesEarlyIsStillValidation) {
  TrainingRun run;
  for (int i = 0; i < 20; ++i) run.TrainStep();
  const uint64_t eval = run.Allocs(kEvalStacks, 10);  // a forward pass's first layers
  run.Oom(kEvalStacks + 10);
  const std::vector<std::string> got = Describe(run.Finish());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[2], "push validate@" + std::to_string(eval - 1));
  EXPECT_EQ(got[3], "pop@" + std::to_string(run.seq()));
}

// One odd request that fails after training (a request larger than the card) is not validation.
TEST(StepPhases, OneFailedRequestIsNotValidation) {
  TrainingRun run;
  for (int i = 0; i < 20; ++i) run.TrainStep();
  run.Oom(kEvalStacks);
  EXPECT_TRUE(run.Finish().empty());
}

TEST(StepPhases, TrainingAloneHasNoPhases) {
  TrainingRun run;
  for (int i = 0; i < 50; ++i) run.TrainStep();
  EXPECT_TRUE(run.Finish().empty());
}

TEST(StepPhases, ValidationBeforeEnoughBackwardPassesIsNotCalledSo) {
  TrainingRun run;
  for (int i = 0; i < 5; ++i) run.TrainStep();  // fewer than kMinPasses
  run.Allocs(kEvalStacks, 40);
  for (int i = 0; i < 20; ++i) run.TrainStep();
  EXPECT_TRUE(run.Finish().empty());
}

TEST(StepPhases, AnOptimizerStepEveryFewMicroBatchesIsTraining) {
  TrainingRun run;
  for (int i = 0; i < 64; ++i) {
    run.TrainStep(/*accumulate=*/true);
    if (i % 4 == 3) run.Allocs(kOptimizerStacks, 60);  // more allocations than a forward pass
  }
  EXPECT_TRUE(run.Finish().empty());
}

TEST(StepPhases, AShortStretchOfRareCodeIsNotValidation) {
  TrainingRun run;
  for (int i = 0; i < 20; ++i) run.TrainStep();
  run.Allocs(kLogStacks, 20);  // fewer than kMinAllocs: a log line's tensors
  for (int i = 0; i < 20; ++i) run.TrainStep();
  run.Allocs(kLogStacks + 100, 40);  // at least half the median epoch (60 program allocations): validation
  for (int i = 0; i < 20; ++i) run.TrainStep();
  const std::vector<PhaseInfo> got = run.Finish();
  ASSERT_EQ(got.size(), 5u);  // only the second stretch: train, validate, train (open to the end)
  EXPECT_EQ(got[2].name, kValidatePhase);
}

}  // namespace
}  // namespace cumemtrace::analyzer
