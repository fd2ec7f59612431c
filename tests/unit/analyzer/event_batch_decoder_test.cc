// DecodeEventBatch on plain columns: the column rules without protobuf in the way.
#include "analyzer/reader/event_batch_decoder.h"

#include <vector>

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

TEST(EventBatchDecoder, EmptyBatch) {
  BatchColumns c;
  std::vector<Event> out(3);
  size_t rows = 99;
  ASSERT_TRUE(DecodeEventBatch(c, &out, &rows).ok());
  EXPECT_EQ(rows, 0u);
  // A constant column with zero rows is harmless.
  const std::vector<uint32_t> thread = {4};
  c.thread = thread;
  EXPECT_TRUE(DecodeEventBatch(c, &out, &rows).ok());
}

TEST(EventBatchDecoder, SeqDeltasAndWrapping) {
  const std::vector<int64_t> seq_delta = {0, 2, -1, 5};
  const std::vector<int64_t> time_delta = {7, -3, 0, 10};
  const std::vector<uint32_t> api = {40, 60, 40, 60};  // cudaMalloc, cudaFree, cudaMalloc, cudaFree
  const std::vector<int64_t> address_delta = {-1, 1, 0x100, -0x100};
  const std::vector<uint64_t> size = {11, 22};
  const std::vector<uint64_t> stack = {1, 2, 3, 4};
  const std::vector<uint32_t> thread = {9};
  const std::vector<int32_t> device = {-1, 0, 1, 2};
  BatchColumns c;
  c.first_seq = 100;
  c.base_time_ns = -5;
  c.seq_delta = seq_delta;
  c.time_delta_ns = time_delta;
  c.api = api;
  c.address_delta = address_delta;
  c.size = size;
  c.stack = stack;
  c.thread = thread;
  c.device = device;
  const std::vector<FailureColumn> failures = {{2, 2, 10, 20, true}};
  c.failures = failures;
  std::vector<Event> out;
  size_t rows = 0;
  ASSERT_TRUE(DecodeEventBatch(c, &out, &rows).ok());
  ASSERT_EQ(rows, 4u);
  EXPECT_EQ(out[0].seq, 100u);
  EXPECT_EQ(out[1].seq, 102u);
  EXPECT_EQ(out[2].seq, 101u);
  EXPECT_EQ(out[3].seq, 106u);
  EXPECT_EQ(out[0].time_ns, 2);
  EXPECT_EQ(out[1].time_ns, -1);
  EXPECT_EQ(out[3].time_ns, 9);
  EXPECT_EQ(out[0].address, 0xffff'ffff'ffff'ffffull);
  EXPECT_EQ(out[1].address, 0u);
  EXPECT_EQ(out[2].address, 0x100u);
  EXPECT_EQ(out[3].address, 0u);
  EXPECT_EQ(out[0].size, 11u);
  EXPECT_EQ(out[1].size, 0u);
  EXPECT_EQ(out[2].size, 22u);
  EXPECT_EQ(out[2].result, 2);
  EXPECT_TRUE(out[2].has_mem_info);
  EXPECT_EQ(out[2].free_bytes, 10u);
  EXPECT_EQ(out[1].result, 0);
  for (const Event& e : out) EXPECT_EQ(e.thread, 9u);
  EXPECT_EQ(out[0].device, -1);
  EXPECT_EQ(out[3].device, 2);
  EXPECT_EQ(out[3].stack, 4u);
}

TEST(EventBatchDecoder, ExtremeDeltasDoNotOverflow) {
  const std::vector<int64_t> time_delta = {INT64_MAX, INT64_MAX, INT64_MIN};
  const std::vector<uint32_t> api = {60, 60, 60};
  const std::vector<int64_t> address_delta = {INT64_MIN, INT64_MIN, INT64_MAX};
  const std::vector<uint64_t> one = {0};
  const std::vector<uint32_t> thread = {0};
  const std::vector<int32_t> device = {0};
  BatchColumns c;
  c.first_seq = UINT64_MAX;
  c.base_time_ns = INT64_MAX;
  c.time_delta_ns = time_delta;
  c.api = api;
  c.address_delta = address_delta;
  c.stack = one;
  c.thread = thread;
  c.device = device;
  std::vector<Event> out;
  size_t rows = 0;
  ASSERT_TRUE(DecodeEventBatch(c, &out, &rows).ok());
  EXPECT_EQ(out[0].seq, UINT64_MAX);
  EXPECT_EQ(out[1].seq, 0u);  // first_seq + 1 wraps
}

}  // namespace
}  // namespace cumemtrace::analyzer
