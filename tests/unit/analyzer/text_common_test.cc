// Text formatting: sizes, seconds, dates, names.
#include "analyzer/render/text/text_common.h"

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

TEST(TextCommon, HumanBytes) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1024), "1.0 KiB");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(1024 * 1024 - 1), "1.0 MiB");  // not "1024.0 KiB"
  EXPECT_EQ(HumanBytes(uint64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(HumanBytes(uint64_t{150'000'000'000}), "139.7 GiB");
  EXPECT_EQ(HumanBytes(uint64_t{1} << 40), "1.0 TiB");
  EXPECT_EQ(HumanBytes(UINT64_MAX), "16.0 EiB");
}

TEST(TextCommon, Seconds) {
  EXPECT_EQ(Seconds(0), "0.000 s");
  EXPECT_EQ(Seconds(10'500'000), "0.010 s");
  EXPECT_EQ(Seconds(12'345'678'901), "12.345 s");
  EXPECT_EQ(Seconds(-1'500'000'000), "-1.500 s");
  EXPECT_EQ(Seconds(INT64_MIN), "-9223372036.854 s");
}

TEST(TextCommon, DatesAndNames) {
  EXPECT_EQ(UtcDate(1'763'776'323'000'000'000), "2025-11-22 01:52:03 UTC");
  EXPECT_EQ(UtcDate(0), "unknown");
  EXPECT_EQ(UtcDate(INT64_MAX), "2262-04-11 23:47:16 UTC");
  EXPECT_EQ(DeviceName(-1), "host");
  EXPECT_EQ(DeviceName(3), "device 3");
  EXPECT_EQ(ThreadLabel(2, "pt_data_pin"), "pt_data_pin (#2)");
  EXPECT_EQ(ThreadLabel(2, ""), "#2");
  EXPECT_EQ(Printable("a\nb\x1b"), "a?b?");
}

TEST(TextCommon, Frames) {
  Frame known;
  known.function = "cudaMalloc";
  known.function_known = true;
  known.module = "/usr/lib/libcudart.so.13";
  EXPECT_EQ(FrameText(known), "cudaMalloc  (libcudart.so.13)");
  known.file = "train.py";
  known.line = 12;
  EXPECT_EQ(FrameText(known), "cudaMalloc  train.py:12  (libcudart.so.13)");
  Frame unknown;
  unknown.function = "??";
  unknown.pc = 0x40200;
  unknown.module = "/opt/torch/lib/libtorch.so";
  unknown.offset = 0x200;
  EXPECT_EQ(FrameText(unknown), "?? (libtorch.so+0x200)");
  std::string out;
  AppendFrames({known, unknown}, 1, "  ", &out);
  EXPECT_EQ(out, "  cudaMalloc  train.py:12  (libcudart.so.13)\n");
  out.clear();
  AppendFrames({}, 3, "  ", &out);
  EXPECT_EQ(out, "  (no stack)\n");
  // Unnamed frames of one module share a line, so that the named caller below them is shown within `max`.
  Frame inner = unknown;
  inner.offset = 0x180;
  out.clear();
  AppendFrames({inner, unknown, known}, 2, "  ", &out);
  EXPECT_EQ(out, "  ?? x2 (libtorch.so, unnamed frames)\n  cudaMalloc  train.py:12  (libcudart.so.13)\n");
}

}  // namespace
}  // namespace cumemtrace::analyzer
