// Differential test of the EventBatch fast path against protoc's generated parser: whenever the fast path takes a
// batch, the generated parser must accept the same bytes and yield the same columns, value for value. Inputs:
// random batches, random mutations of them, and encodings the fast path must leave to the generated parser.
#include "analyzer/reader/event_batch_wire.h"

#include <random>
#include <string>

#include "gtest/gtest.h"
#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {
namespace {

template <typename T, typename F>
void ExpectSame(absl::Span<const T> fast, const google::protobuf::RepeatedField<F>& slow, const char* name) {
  ASSERT_EQ(fast.size(), static_cast<size_t>(slow.size())) << name;
  for (int i = 0; i < slow.size(); ++i) ASSERT_EQ(fast[i], static_cast<T>(slow.Get(i))) << name << "[" << i << "]";
}

// Returns whether the fast path took `bytes`; if it did, checks it against the generated parser.
bool Check(const std::string& bytes) {
  EventBatchWire wire;
  const bool taken = wire.Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!taken) return false;
  format::EventBatch slow;
  EXPECT_TRUE(slow.ParseFromString(bytes)) << "fast path took bytes the generated parser rejects";
  const BatchColumns& c = wire.columns();
  EXPECT_EQ(c.first_seq, slow.first_seq());
  EXPECT_EQ(c.base_time_ns, slow.base_time_ns());
  EXPECT_EQ(c.address_shift, slow.address_shift());
  ExpectSame(c.seq_delta, slow.seq_delta(), "seq_delta");
  ExpectSame(c.time_delta_ns, slow.time_delta_ns(), "time_delta_ns");
  ExpectSame(c.api, slow.api(), "api");
  ExpectSame(c.address_delta, slow.address_delta(), "address_delta");
  ExpectSame(c.size, slow.size(), "size");
  ExpectSame(c.stack, slow.stack(), "stack");
  ExpectSame(c.thread, slow.thread(), "thread");
  ExpectSame(c.device, slow.device(), "device");
  ExpectSame(c.stream, slow.stream(), "stream");
  ExpectSame(c.aux, slow.aux(), "aux");
  EXPECT_EQ(c.failures.size(), static_cast<size_t>(slow.failures_size()));
  for (int i = 0; i < slow.failures_size() && static_cast<size_t>(i) < c.failures.size(); ++i) {
    EXPECT_EQ(c.failures[i].row, slow.failures(i).row());
    EXPECT_EQ(c.failures[i].result, slow.failures(i).result());
    EXPECT_EQ(c.failures[i].free_bytes, slow.failures(i).free_bytes());
    EXPECT_EQ(c.failures[i].total_bytes, slow.failures(i).total_bytes());
    EXPECT_EQ(c.failures[i].has_mem_info, slow.failures(i).has_mem_info());
  }
  return true;
}

format::EventBatch RandomBatch(std::mt19937_64& rng) {
  const uint64_t extremes[] = {0, 1, 127, 128, 16383, 16384, 0x7fffffffffffffffull, 0x8000000000000000ull,
                               0xffffffffffffffffull};
  auto value = [&]() { return rng() % 2 ? extremes[rng() % 9] : rng() >> (rng() % 64); };
  format::EventBatch b;
  b.set_first_seq(value());
  b.set_base_time_ns(static_cast<int64_t>(value()));
  if (rng() % 2) b.set_address_shift(static_cast<uint32_t>(value()));
  const int rows = static_cast<int>(rng() % 50);
  for (int i = 0; i < rows; ++i) {
    if (rng() % 2) b.add_seq_delta(static_cast<int64_t>(value()));
    b.add_time_delta_ns(static_cast<int64_t>(value()));
    b.add_api(static_cast<uint32_t>(value()));
    b.add_address_delta(static_cast<int64_t>(value()));
    if (rng() % 2) b.add_size(value());
    if (rng() % 3 == 0) b.add_stack(value());
    if (rng() % 3 == 0) b.add_thread(static_cast<uint32_t>(value()));
    if (rng() % 3 == 0) b.add_device(static_cast<int32_t>(value()));
    if (rng() % 4 == 0) b.add_stream(value());
    if (rng() % 4 == 0) b.add_aux(value());
    if (rng() % 8 == 0) {
      format::Failure* f = b.add_failures();
      f->set_row(static_cast<uint32_t>(value()));
      f->set_result(static_cast<int32_t>(value()));
      f->set_free_bytes(value());
      f->set_total_bytes(value());
      f->set_has_mem_info(rng() % 2);
    }
  }
  return b;
}

TEST(EventBatchWire, TakesEveryCanonicalBatchAndAgrees) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 3000; ++i) {
    const std::string bytes = RandomBatch(rng).SerializeAsString();
    EXPECT_TRUE(Check(bytes)) << i;
  }
  // What the test builder (the column rules) writes, too.
  EXPECT_TRUE(Check(TraceBuilder::Encode({Alloc(1, 1, 0x1000, 10), Free(2, 2, 0x1000)}).SerializeAsString()));
}

TEST(EventBatchWire, AgreesOnMutatedBytes) {
  std::mt19937_64 rng(12);
  int taken = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = RandomBatch(rng).SerializeAsString();
    if (bytes.empty()) continue;
    switch (rng() % 4) {
      case 0: bytes[rng() % bytes.size()] = static_cast<char>(rng()); break;
      case 1: bytes.resize(rng() % bytes.size()); break;
      case 2: bytes.insert(rng() % bytes.size(), 1, static_cast<char>(rng())); break;
      case 3:
        for (int k = 0; k < 3; ++k) bytes[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
        break;
    }
    taken += Check(bytes);
  }
  EXPECT_GT(taken, 1000);
}

TEST(EventBatchWire, LeavesUnusualEncodingsToTheGeneratedParser) {
  // api written unpacked (field 5, wire type 0): valid protobuf, not the fast path's job.
  EXPECT_FALSE(Check(std::string("\x28\x28", 2)));
  // A column split in two fields: the generated parser concatenates them.
  EXPECT_FALSE(Check(std::string("\x2a\x01\x28\x2a\x01\x3c", 6)));
  // A group (wire type 3) of an unknown field.
  EXPECT_FALSE(Check(std::string("\xa3\x06\xa4\x06", 4)));
  // Field number 0.
  EXPECT_FALSE(Check(std::string("\x00\x01", 2)));
  // first_seq with the wrong wire type.
  EXPECT_FALSE(Check(std::string("\x0a\x00", 2)));
  // Unknown fields of every wire type are skipped.
  EXPECT_TRUE(Check(std::string("\xa0\x06\x01\xa1\x06\x01\x02\x03\x04\x05\x06\x07\x08\xa2\x06\x01\x00\xa5\x06\x01\x02\x03\x04"
                                "\x2a\x01\x28",
                                26)));
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
