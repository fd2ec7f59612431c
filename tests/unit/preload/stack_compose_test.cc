// ComposeKeptStack: the stack the writer makes of a kept one. (No interpreter runs here, so no native frame is in
// the eval loop: the Python frames go after the native ones, as python_splice.h says; python_splice_test covers
// the splicing itself.)
#include "preload/stack_compose.h"

#include <vector>

#include "gtest/gtest.h"
#include "proto/format.h"

namespace cumemtrace::preload {
namespace {

constexpr uint64_t P(uint64_t id) { return format::PcOfPythonFrameId(id); }

std::vector<uint64_t> Compose(const OutputQueue::KeptStack& kept, int max_out = 16) {
  std::vector<uint64_t> out(static_cast<size_t>(max_out));
  out.resize(static_cast<size_t>(ComposeKeptStack(kept, out.data(), max_out)));
  return out;
}

TEST(StackCompose, APlainStackIsItsNativeFrames) {
  const uint64_t native[] = {10, 11, 12};
  EXPECT_EQ(Compose({native, 3, false, nullptr, 0, nullptr, 0}), std::vector<uint64_t>({10, 11, 12}));
  EXPECT_EQ(Compose({native, 3, false, nullptr, 0, nullptr, 0}, 2), std::vector<uint64_t>({10, 11}));
}

TEST(StackCompose, AThreadWithoutPythonFramesIsMarkedOutermost) {
  const uint64_t native[] = {10, 11, 12};
  const uint64_t marker = P(format::kNoPythonFramesId);
  EXPECT_EQ(Compose({native, 3, true, nullptr, 0, nullptr, 0}), std::vector<uint64_t>({10, 11, 12, marker}));
  // Cut to the room there is, the marker kept.
  EXPECT_EQ(Compose({native, 3, true, nullptr, 0, nullptr, 0}, 3), std::vector<uint64_t>({10, 11, marker}));
  EXPECT_EQ(Compose({nullptr, 0, true, nullptr, 0, nullptr, 0}), std::vector<uint64_t>({marker}));
}

TEST(StackCompose, PythonFramesAreSplicedIn) {
  const uint64_t native[] = {10, 11};
  const uint64_t python[] = {P(1), P(2), P(3)};
  const uint16_t group_end[] = {2, 3};
  EXPECT_EQ(Compose({native, 2, true, python, 3, group_end, 2}),
            std::vector<uint64_t>({10, 11, P(1), P(2), P(3)}));
  EXPECT_EQ(Compose({native, 2, true, python, 3, group_end, 2}, 4), std::vector<uint64_t>({10, 11, P(1), P(2)}));
}

}  // namespace
}  // namespace cumemtrace::preload
