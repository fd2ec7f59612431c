// The autograd node named from a backward allocation's native frames (reports/autograd_report.h), on frame names as
// PyTorch 2.11's libtorch_cpu.so symbols demangle.
#include "analyzer/reports/autograd_report.h"

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

std::vector<Frame> Frames(const std::vector<std::string>& functions) {
  std::vector<Frame> frames;
  for (const std::string& f : functions) {
    Frame frame;
    frame.function = f;
    frame.function_known = true;
    frames.push_back(frame);
  }
  return frames;
}

TEST(AutogradNode, TheInnermostApplyNamesTheNode) {
  EXPECT_EQ(AutogradNodeOf(Frames({
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long, CUstream_st*)",
                "at::native::mm(at::Tensor const&, at::Tensor const&)",
                "torch::autograd::generated::details::mm_mat1_backward(at::Tensor const&, at::Tensor const&)",
                "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> "
                ">&&)",
                "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
                "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, "
                "torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> "
                "const&)",
            })),
            "MmBackward0");
  EXPECT_EQ(AutogradNodeOf(Frames({"at::empty_like(at::Tensor const&)",
                                   "torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, "
                                   "std::allocator<at::Tensor> >&&)"})),
            "AccumulateGrad");
  EXPECT_EQ(AutogradNodeOf(Frames({"torch::autograd::CppNode<MyFunction>::apply(std::vector<at::Tensor, "
                                   "std::allocator<at::Tensor> >&&)"})),
            "CppNode<MyFunction>");
  EXPECT_EQ(AutogradNodeOf(Frames({"torch::autograd::generated::SoftmaxBackward0::apply_with_saved("
                                   "torch::dynamo::autograd::SwapSavedVariables&)"})),
            "SoftmaxBackward0");
}

TEST(AutogradNode, NoNodeWithoutAnApplyFrame) {
  EXPECT_EQ(AutogradNodeOf(Frames({"at::native::mm(at::Tensor const&, at::Tensor const&)",
                                   "torch::autograd::VariableType::(anonymous namespace)::mm(c10::DispatchKeySet, "
                                   "at::Tensor const&, at::Tensor const&)",
                                   "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> "
                                   "const&)"})),
            "");
  EXPECT_EQ(AutogradNodeOf({}), "");
}

}  // namespace
}  // namespace cumemtrace::analyzer
