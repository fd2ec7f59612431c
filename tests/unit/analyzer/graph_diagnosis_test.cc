// The graph-retention diagnosis through the whole analyzer (trace_builder.h traces, Analyze(), the OOM report):
// an evaluation loop without no_grad after training is named, with the line of the call that recorded; a training
// step that runs a new kernel (new stacks under the same call path as every earlier step) is not.
//
// Threads: 0 the program ("python"), 1 autograd's engine ("pt_autograd_0"). Python frames: 1 train (train.py:30),
// 2 evaluate (train.py:50), 3 <module> (train.py:70), 4 Linear.forward (torch/nn/modules/linear.py:125, a library).
// Each training step: two 100 MiB activations made inside Linear.forward under train(), a 10 MiB gradient on the
// engine's thread (a backward pass), the activations freed, then the optimizer's 1 MiB under no_grad.
#include <memory>
#include <string>
#include <vector>

#include "analyzer/model/analysis.h"
#include "analyzer/reports/oom_report.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {
namespace {

using format::Api;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kCuda = 0x10100;      // libcuda.so.1
constexpr uint64_t kC10 = 0x30100;       // libc10_cuda.so: one kernel's path to the allocator
constexpr uint64_t kC10Other = 0x30200;  // ... another kernel's
constexpr uint64_t kSeg = 0x100000000;
constexpr uint32_t kProgram = 0, kEngine = 1;

class GraphTrace {
 public:
  GraphTrace() {
    format::Header h = TraceBuilder::DefaultHeader();
    h.set_format_version(format::kFormatVersion);
    h.set_executable("/usr/bin/python3.12");
    h.set_python_frames_enabled(true);
    b_.Header(h)
        .Device(0, "NVIDIA H100", 80 * 1024 * kMiB)
        .Thread(kProgram, 100, "python")
        .Thread(kEngine, 101, "pt_autograd_0")
        .Module(1, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", 0x10000, 0x10000, 0x20000)
        .Module(2, "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so", 0x30000, 0x30000, 0x40000)
        .Strings(1, {"train", "/home/u/proj/train.py", "evaluate", "<module>", "Linear.forward",
                     "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py"})
        .PythonFrames(1, {1, 3, 4, 5}, {2, 2, 2, 6}, {30, 50, 70, 125});
    train_ = b_.Stack({kC10, PyPc(4), PyPc(1), PyPc(3)});
    train_new_kernel_ = b_.Stack({kC10Other, PyPc(4), PyPc(1), PyPc(3)});
    eval_ = b_.Stack({kC10, PyPc(4), PyPc(2), PyPc(3)});
    grad_ = b_.Stack({kC10, PyPc(0)});
    optimizer_ = b_.Stack({kC10, PyPc(1), PyPc(3)});
    const uint64_t segment = b_.Stack({kCuda, kC10, PyPc(1), PyPc(3)});
    b_.AllocatorAttach(0, "", true);
    Add(Alloc(Seq(), Ms(), kSeg, 4096 * kMiB, segment));
    Add(Torch(Seq(), Ms(), Api::kTorchSegmentAlloc, kSeg, 4096 * kMiB));
  }

  // One training step (forward, backward, optimizer); leaves nothing live but the optimizer's state.
  void TrainingStep() {
    Block(Api::kTorchAllocGrad, train_, 100 * kMiB, kProgram, /*keep=*/false);
    Block(Api::kTorchAllocGrad, train_, 100 * kMiB, kProgram, false);
    Block(Api::kTorchAllocNoGrad, grad_, 10 * kMiB, kEngine, false);
    Block(Api::kTorchAllocNoGrad, optimizer_, kMiB, kProgram, true);
  }
  // A block kept live (`keep`) or freed at once.
  void Block(Api api, uint64_t stack, uint64_t size, uint32_t thread, bool keep) {
    Ev e = Torch(Seq(), Ms(), api, kSeg + next_, size, stack);
    e.thread = thread;
    Add(e);
    if (!keep) Add(Torch(Seq(), Ms(), Api::kTorchFree, kSeg + next_));
    next_ += size;  // never reused: the layer's extents stay simple
  }
  void Oom() {
    Add(Torch(Seq(), Ms(), Api::kTorchOom, 0, 2048 * kMiB, train_, 0, 100 * kMiB));
  }
  std::unique_ptr<Analysis> Analyzed(const std::string& name) {
    b_.Events(events_).Trailer(events_.size(), kStartNs + 1'000'000'000);
    absl::StatusOr<std::unique_ptr<Analysis>> a = Analyze(b_.Write(name), AnalyzeOptions{});
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *std::move(a) : nullptr;
  }

  uint64_t train_ = 0, train_new_kernel_ = 0, eval_ = 0, grad_ = 0, optimizer_ = 0;

 private:
  uint64_t Seq() { return ++seq_; }
  double Ms() { return static_cast<double>(seq_); }
  void Add(const Ev& e) { events_.push_back(e); }

  TraceBuilder b_;
  std::vector<Ev> events_;
  uint64_t seq_ = 0;
  uint64_t next_ = 0;
};

AutogradView LastOomAutograd(const Analysis& a) {
  FrameResolver resolver(a.stacks, a.symbols, a.python_frames);
  OomReport r = BuildOomReport(a, ReportOptions{}, resolver);
  EXPECT_EQ(r.torch_ooms.size(), 1u);
  return r.torch_ooms.empty() ? AutogradView{} : r.torch_ooms.back().autograd;
}

TEST(GraphDiagnosis, EvaluationWithoutNoGradAfterTrainingIsNamed) {
  GraphTrace t;
  t.TrainingStep();
  t.TrainingStep();
  for (int batch = 0; batch < 3; ++batch) t.Block(Api::kTorchAllocGrad, t.eval_, 100 * kMiB, kProgram, true);
  t.Oom();
  auto a = t.Analyzed("graph_eval.pb");
  ASSERT_NE(a, nullptr);
  const AutogradView v = LastOomAutograd(*a);
  EXPECT_TRUE(v.grad_known);
  EXPECT_EQ(v.finding.fix, GraphFix::kNoGrad);
  EXPECT_EQ(v.finding.bytes, 300 * kMiB);
  EXPECT_EQ(v.finding.count, 3u);
  EXPECT_EQ(v.finding.backward_passes, 2u);
  ASSERT_TRUE(v.finding.where.has_value());
  EXPECT_EQ(v.finding.where->function, "evaluate");
  EXPECT_EQ(v.finding.where->line, 50u);
}

// A training step that runs out of memory in a kernel no earlier step ran: new stacks, but under the call path
// (train.py:30 in train) that a backward pass followed in every earlier step. Not an evaluation: no finding.
TEST(GraphDiagnosis, ANewKernelInATrainingStepIsNotNamed) {
  GraphTrace t;
  t.TrainingStep();
  t.TrainingStep();
  for (int i = 0; i < 3; ++i) t.Block(Api::kTorchAllocGrad, t.train_new_kernel_, 100 * kMiB, kProgram, true);
  t.Oom();
  auto a = t.Analyzed("graph_new_kernel.pb");
  ASSERT_NE(a, nullptr);
  const AutogradView v = LastOomAutograd(*a);
  EXPECT_TRUE(v.grad_known);
  EXPECT_EQ(v.finding.fix, GraphFix::kNone);
}

// Before any backward pass, recording code may be a training script's first forward: nothing is said.
TEST(GraphDiagnosis, NothingBeforeTheFirstBackwardPass) {
  GraphTrace t;
  for (int batch = 0; batch < 3; ++batch) t.Block(Api::kTorchAllocGrad, t.eval_, 100 * kMiB, kProgram, true);
  t.Oom();
  auto a = t.Analyzed("graph_no_backward.pb");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(LastOomAutograd(*a).finding.fix, GraphFix::kNone);
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
