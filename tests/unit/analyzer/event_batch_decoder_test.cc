// DecodeEventBatch on plain columns: the column rules without protobuf in the way.
#include "analyzer/reader/event_batch_decoder.h"

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "analyzer/reader/api_lookup.h"
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

// Version 3: deltas are stored divided by 2^address_shift; the reader multiplies back, wrapping like the deltas.
TEST(EventBatchDecoder, AddressShift) {
  const std::vector<int64_t> address_delta = {0x3f9d000000, 1, -0x3f9d000002, 1};
  const std::vector<int64_t> zeros = {0, 0, 0, 0};
  const std::vector<uint32_t> api = {40, 60, 40, 60};  // cudaMalloc, cudaFree, cudaMalloc, cudaFree
  const std::vector<uint64_t> size = {512, 1024};
  const std::vector<uint64_t> stack = {0};  // one stack, thread and device for every row
  const std::vector<uint32_t> thread = {1};
  const std::vector<int32_t> device = {0};
  BatchColumns c;
  c.first_seq = 1;
  c.stack = stack;
  c.thread = thread;
  c.device = device;
  c.time_delta_ns = zeros;
  c.api = api;
  c.address_delta = address_delta;
  c.size = size;
  c.address_shift = 9;
  c.format_version = 3;
  std::vector<Event> out;
  size_t rows = 0;
  absl::Status decoded = DecodeEventBatch(c, &out, &rows);
  ASSERT_TRUE(decoded.ok()) << decoded;
  ASSERT_EQ(rows, 4u);
  EXPECT_EQ(out[0].address, 0x7f3a00000000u);
  EXPECT_EQ(out[1].address, 0x7f3a00000200u);
  EXPECT_EQ(out[2].address, 0xfffffffffffffe00u);  // below zero: wraps as the deltas do
  EXPECT_EQ(out[3].address, 0u);
  c.address_shift = 64;
  absl::Status bad = DecodeEventBatch(c, &out, &rows);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "event batch address_shift is 64 (at most 63)");
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

// Format version 2: thread and device as runs, the stack column over the rows whose api has a stack only.
// From version 5 a segment given back (torch.segment_free 84, torch.segment_unmap 86) has a stack entry; before, it
// has none, and the same columns read as version 4 must give it stack 0.
TEST(EventBatchDecoder, Version5SegmentReleasesHaveAStack) {
  // torch.alloc, torch.segment_free, torch.segment_unmap, torch.segment_alloc (never a stack)
  const std::vector<uint32_t> api = {80, 84, 86, 83};
  const std::vector<int64_t> zeros = {0, 0, 0, 0};
  const std::vector<uint64_t> size = {10, 2097152, 2097152, 2097152};
  const std::vector<uint64_t> stream = {0, 0, 0, 0};
  const std::vector<uint64_t> v5_stack = {7, 8, 9};
  const std::vector<uint64_t> v4_stack = {7};
  const std::vector<uint32_t> thread = {1, 1, 1, 1};
  const std::vector<int32_t> device = {0, 0, 0, 0};
  BatchColumns c;
  c.first_seq = 1;
  c.time_delta_ns = zeros;
  c.api = api;
  c.address_delta = zeros;
  c.size = size;
  c.stream = stream;
  c.thread = thread;
  c.device = device;
  std::vector<Event> out;
  size_t rows = 0;
  c.format_version = 5;
  c.stack = v5_stack;
  ASSERT_TRUE(DecodeEventBatch(c, &out, &rows).ok());
  EXPECT_EQ((std::vector<uint64_t>{out[0].stack, out[1].stack, out[2].stack, out[3].stack}),
            (std::vector<uint64_t>{7, 8, 9, 0}));
  c.format_version = 4;
  c.stack = v4_stack;
  ASSERT_TRUE(DecodeEventBatch(c, &out, &rows).ok());
  EXPECT_EQ((std::vector<uint64_t>{out[0].stack, out[1].stack, out[2].stack, out[3].stack}),
            (std::vector<uint64_t>{7, 0, 0, 0}));
  c.stack = v5_stack;  // a version 4 batch with entries for the releases: the column is too long
  EXPECT_EQ(DecodeEventBatch(c, &out, &rows).message(),
            "event batch column stack has 3 entries for 1 rows with a stack");
}

TEST(EventBatchDecoder, Version2RunsAndStackRows) {
  // torch.alloc, torch.free (no stack), torch.alloc, torch.segment_alloc (no stack), cudaMalloc
  const std::vector<uint32_t> api = {80, 88, 80, 83, 40};
  const std::vector<int64_t> zeros = {0, 0, 0, 0, 0};
  const std::vector<uint64_t> size = {10, 20, 2097152, 30};
  const std::vector<uint64_t> stream = {0, 0, 0};
  const std::vector<uint64_t> stack = {7, 8, 9};
  const std::vector<uint32_t> thread = {1, 2}, thread_runs = {2, 3};
  const std::vector<int32_t> device = {0, -1};
  const std::vector<uint32_t> device_runs = {4, 1};
  BatchColumns c;
  c.first_seq = 1;
  c.time_delta_ns = zeros;
  c.api = api;
  c.address_delta = zeros;
  c.size = size;
  c.stream = stream;
  c.stack = stack;
  c.thread = thread;
  c.thread_runs = thread_runs;
  c.device = device;
  c.device_runs = device_runs;
  c.format_version = 2;
  std::vector<Event> out;
  size_t rows = 0;
  ASSERT_TRUE(DecodeEventBatch(c, &out, &rows).ok());
  ASSERT_EQ(rows, 5u);
  EXPECT_EQ((std::vector<uint64_t>{out[0].stack, out[1].stack, out[2].stack, out[3].stack, out[4].stack}),
            (std::vector<uint64_t>{7, 0, 8, 0, 9}));
  EXPECT_EQ((std::vector<uint32_t>{out[0].thread, out[1].thread, out[2].thread, out[3].thread, out[4].thread}),
            (std::vector<uint32_t>{1, 1, 2, 2, 2}));
  EXPECT_EQ((std::vector<int32_t>{out[0].device, out[1].device, out[2].device, out[3].device, out[4].device}),
            (std::vector<int32_t>{0, 0, 0, 0, -1}));

  // One stack entry: the same for every row that has one.
  const std::vector<uint64_t> one = {5};
  c.stack = one;
  ASSERT_TRUE(DecodeEventBatch(c, &out, &rows).ok());
  EXPECT_EQ(out[1].stack, 0u);
  EXPECT_EQ(out[4].stack, 5u);

  // Runs that do not cover the batch, or a stack column of the wrong length, are errors naming the column.
  const std::vector<uint32_t> short_runs = {2, 2};
  c.thread_runs = short_runs;
  EXPECT_EQ(DecodeEventBatch(c, &out, &rows).message(),
            "event batch column thread runs cover 4 rows of a batch of 5");
  c.thread_runs = thread_runs;
  const std::vector<uint64_t> two = {5, 6};
  c.stack = two;
  EXPECT_EQ(DecodeEventBatch(c, &out, &rows).message(),
            "event batch column stack has 2 entries for 3 rows with a stack");
}

bool SameEvent(const Event& a, const Event& b) {
  return a.seq == b.seq && a.time_ns == b.time_ns && a.info == b.info && a.address == b.address &&
         a.size == b.size && a.stream == b.stream && a.aux == b.aux && a.stack == b.stack &&
         a.free_bytes == b.free_bytes && a.total_bytes == b.total_bytes && a.api == b.api && a.device == b.device &&
         a.thread == b.thread && a.result == b.result && a.has_mem_info == b.has_mem_info &&
         a.cupti_only == b.cupti_only;
}

// Decoding piece by piece (as the reader does) gives the rows of decoding the batch at once, whatever the pieces'
// sizes: the running sums and per-api columns carry over, and failures and CUPTI rows (in any order in the column)
// land on their rows. Start() also says the order of the numbers before any row is decoded.
TEST(EventBatchDecoder, PiecesEqualTheWholeBatch) {
  std::mt19937_64 rng(11);
  // Every api this version knows (rows with and without size, stream and aux entries), and one it does not.
  std::vector<uint32_t> apis = {kApiIndexSize + 7};
  for (uint32_t a = 0; a < kApiIndexSize; ++a) {
    if (LookupApi(a) != nullptr) apis.push_back(a);
  }
  for (int round = 0; round < 50; ++round) {
    const size_t rows = 1 + rng() % 700;
    std::vector<uint32_t> api(rows), thread(rows);
    std::vector<int64_t> seq_delta(rows), time_delta(rows), address_delta(rows);
    std::vector<int32_t> device(rows);
    std::vector<uint64_t> stack(rows), size, stream, aux;
    const bool dense = round % 2 == 0;
    for (size_t i = 0; i < rows; ++i) {
      api[i] = apis[rng() % apis.size()];
      const uint8_t columns = LookupColumns(api[i]);
      if (columns & kColumnSize) size.push_back(rng() % 100000);
      if (columns & kColumnStream) stream.push_back(rng() % 4);
      if (columns & kColumnAux) aux.push_back(rng());
      seq_delta[i] = static_cast<int64_t>(rng() % 5) - (round % 3 == 0 ? 1 : 0);
      time_delta[i] = static_cast<int64_t>(rng() % 1000);
      address_delta[i] = static_cast<int64_t>(rng() % 4096) - 2048;
      thread[i] = static_cast<uint32_t>(rng() % 3);
      device[i] = static_cast<int32_t>(rng() % 2);
      stack[i] = rng() % 50;
    }
    std::vector<FailureColumn> failures;
    // Enough failures, on few enough rows, that a row gets several (a sort that is not stable mixes them up).
    for (int f = 0; f < 60; ++f) {
      failures.push_back({static_cast<uint32_t>(rng() % std::min<size_t>(rows, 40)), 2, rng(), rng(), f % 2 == 0});
    }
    std::vector<uint32_t> cupti_rows;
    for (int k = 0; k < 20; ++k) cupti_rows.push_back(static_cast<uint32_t>(rng() % rows));
    BatchColumns c;
    c.first_seq = 1000;
    c.base_time_ns = 5;
    if (!dense) c.seq_delta = seq_delta;
    c.time_delta_ns = time_delta;
    c.api = api;
    c.address_delta = address_delta;
    c.size = size;
    c.stream = stream;
    c.aux = aux;
    c.stack = stack;
    c.thread = thread;
    c.device = device;
    c.failures = failures;
    c.cupti_rows = cupti_rows;
    c.time_unit_ns = 1000;
    c.address_shift = 4;

    // The reference: the batch at once. A row with failures carries the last of them in column order.
    std::vector<Event> whole;
    size_t n = 0;
    ASSERT_TRUE(DecodeEventBatch(c, &whole, &n).ok());
    ASSERT_EQ(n, rows);
    std::map<uint32_t, FailureColumn> last_failure;
    for (const FailureColumn& f : failures) last_failure[f.row] = f;
    for (const auto& [row, f] : last_failure) {
      EXPECT_EQ(whole[row].free_bytes, f.free_bytes);
      EXPECT_EQ(whole[row].has_mem_info, f.has_mem_info);
    }
    for (uint32_t row : cupti_rows) EXPECT_TRUE(whole[row].cupti_only);

    EventBatchDecoder decoder;
    ASSERT_TRUE(decoder.Start(c).ok());
    EXPECT_EQ(decoder.first_seq(), whole[0].seq);
    EXPECT_EQ(decoder.last_seq(), whole[rows - 1].seq);
    bool in_order = true;
    size_t unknown = 0;
    for (size_t i = 0; i < rows; ++i) {
      in_order = in_order && (i == 0 || whole[i].seq >= whole[i - 1].seq);
      unknown += whole[i].info == nullptr ? 1 : 0;
    }
    EXPECT_EQ(decoder.in_order(), in_order);
    EXPECT_EQ(decoder.unknown_rows(), unknown);
    // Each piece into a buffer of its own, as the reader reuses one: a row must land in its own piece.
    std::vector<Event> pieces;
    while (decoder.remaining() != 0) {
      std::vector<Event> piece(1 + rng() % 40);
      piece.resize(decoder.Next(piece.data(), piece.size()));
      pieces.insert(pieces.end(), piece.begin(), piece.end());
    }
    const size_t at = pieces.size();
    ASSERT_EQ(at, rows);
    for (size_t i = 0; i < rows; ++i) ASSERT_TRUE(SameEvent(pieces[i], whole[i])) << "round " << round << " row " << i;
  }
}

}  // namespace
}  // namespace cumemtrace::analyzer
