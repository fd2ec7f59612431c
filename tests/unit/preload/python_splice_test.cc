// SplicePythonFrames: Python frames replace the eval-loop frames they ran in, group by group, and degrade in a
// stated way when the counts disagree.
#include "preload/python_splice.h"

#include <vector>

#include "gtest/gtest.h"

namespace cumemtrace::preload {
namespace {

constexpr uint64_t P(uint64_t id) { return id | (1ull << 63); }

std::vector<uint64_t> Splice(const std::vector<uintptr_t>& native, const std::vector<bool>& eval,
                             const std::vector<uint64_t>& python, const std::vector<uint16_t>& group_end,
                             bool* matched, int max_out = 64) {
  bool is_eval[64];
  for (size_t i = 0; i < eval.size(); ++i) is_eval[i] = eval[i];
  SpliceInput in{native.data(), is_eval, static_cast<int>(native.size()), python.data(), group_end.data(),
                 static_cast<int>(group_end.size())};
  std::vector<uint64_t> out(static_cast<size_t>(max_out));
  out.resize(static_cast<size_t>(SplicePythonFrames(in, out.data(), max_out, matched)));
  return out;
}

TEST(PythonSplice, EachEvalFrameGetsItsGroup) {
  bool matched = false;
  // cudaMalloc, ctypes call, eval#0, PyObject_Call, eval#1, main
  auto out = Splice({10, 11, 12, 13, 14, 15}, {false, false, true, false, true, false}, {P(1), P(2), P(3)},
                    {2, 3}, &matched);
  EXPECT_TRUE(matched);
  EXPECT_EQ(out, (std::vector<uint64_t>{10, 11, P(1), P(2), 13, P(3), 15}));
}

TEST(PythonSplice, MissingEvalFramesGiveTheRestToTheOutermostFound) {
  bool matched = true;
  auto out = Splice({10, 12, 13}, {false, true, false}, {P(1), P(2), P(3)}, {1, 2, 3}, &matched);
  EXPECT_FALSE(matched);
  EXPECT_EQ(out, (std::vector<uint64_t>{10, P(1), P(2), P(3), 13}));
}

TEST(PythonSplice, ExtraEvalFramesStayNative) {
  bool matched = true;
  auto out = Splice({10, 12, 13, 14}, {false, true, false, true}, {P(1)}, {1}, &matched);
  EXPECT_FALSE(matched);
  EXPECT_EQ(out, (std::vector<uint64_t>{10, P(1), 13, 14}));
}

TEST(PythonSplice, EmptyGroupKeepsTheNativeEvalFrame) {
  bool matched = false;
  auto out = Splice({10, 12, 14}, {false, true, true}, {P(1)}, {0, 1}, &matched);
  EXPECT_TRUE(matched);
  EXPECT_EQ(out, (std::vector<uint64_t>{10, 12, P(1)}));
}

TEST(PythonSplice, NoEvalFramePutsPythonOutside) {
  bool matched = true;
  auto out = Splice({10, 11}, {false, false}, {P(1), P(2)}, {2}, &matched);
  EXPECT_FALSE(matched);
  EXPECT_EQ(out, (std::vector<uint64_t>{10, 11, P(1), P(2)}));
}

TEST(PythonSplice, OutputIsCutAtTheOutermostEnd) {
  bool matched = false;
  auto out = Splice({10, 12, 13}, {false, true, false}, {P(1), P(2)}, {2}, &matched, 3);
  EXPECT_EQ(out, (std::vector<uint64_t>{10, P(1), P(2)}));
}

}  // namespace
}  // namespace cumemtrace::preload
