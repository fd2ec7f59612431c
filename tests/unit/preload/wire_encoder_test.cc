// Wire primitives: varint and zigzag encodings against values worked out from the protobuf encoding rules, and the
// in-place length of nested messages when the body outgrows one length byte.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "preload/byte_buffer.h"
#include "preload/wire_encoder.h"

namespace cumemtrace::preload {
namespace {

std::vector<uint8_t> Bytes(const ByteBuffer& b) { return std::vector<uint8_t>(b.data(), b.data() + b.size()); }

TEST(WireEncoder, Varints) {
  ByteBuffer b;
  ASSERT_TRUE(b.Init(4096));
  WireEncoder e(&b);
  e.RawVarint(0);
  e.RawVarint(1);
  e.RawVarint(127);
  e.RawVarint(128);
  e.RawVarint(300);
  EXPECT_EQ(Bytes(b), (std::vector<uint8_t>{0x00, 0x01, 0x7f, 0x80, 0x01, 0xac, 0x02}));
  b.Clear();
  e.RawVarint(~0ull);
  EXPECT_EQ(b.size(), 10u);
  EXPECT_EQ(b.data()[9], 0x01);
  EXPECT_EQ(VarintSize(~0ull), 10u);
  EXPECT_EQ(VarintSize(127), 1u);
  EXPECT_EQ(VarintSize(128), 2u);
  b.Release();
}

TEST(WireEncoder, ZigZag) {
  EXPECT_EQ(ZigZag(0), 0u);
  EXPECT_EQ(ZigZag(-1), 1u);
  EXPECT_EQ(ZigZag(1), 2u);
  EXPECT_EQ(ZigZag(-2), 3u);
  EXPECT_EQ(ZigZag(INT64_MAX), ~0ull - 1);
  EXPECT_EQ(ZigZag(INT64_MIN), ~0ull);
}

TEST(WireEncoder, NestedLengthGrowsInPlace) {
  ByteBuffer b;
  ASSERT_TRUE(b.Init(4096));  // the 300-byte body fits; the fix-up moves it by one byte
  WireEncoder e(&b);
  size_t mark = e.Begin(1);
  std::string body(300, 'a');
  e.Bytes(2, body.data(), body.size());  // tag 0x12, length 0xac 0x02, 300 bytes = 303 bytes
  e.End(mark);
  ASSERT_EQ(b.size(), 1u + 2u + 303u);
  EXPECT_EQ(b.data()[0], 0x0a);
  EXPECT_EQ(b.data()[1], 0xaf);  // 303 = 0x12f -> 0xaf 0x02
  EXPECT_EQ(b.data()[2], 0x02);
  EXPECT_EQ(b.data()[3], 0x12);
  EXPECT_EQ(b.data()[b.size() - 1], 'a');
  b.Release();
}

TEST(ByteBuffer, GrowsBeyondItsFirstMapping) {
  ByteBuffer b;
  ASSERT_TRUE(b.Init(4096));
  std::string chunk(1000, 'z');
  for (int i = 0; i < 100; ++i) b.Append(chunk.data(), chunk.size());
  EXPECT_TRUE(b.ok());
  EXPECT_EQ(b.size(), 100000u);
  EXPECT_EQ(b.data()[99999], 'z');
  b.Release();
}

}  // namespace
}  // namespace cumemtrace::preload
