// Conformance of the preload's wire encoder (preload/trace_writer.cc) with trace.proto: every packet kind is
// written by the preload's code, parsed by protoc's generated classes, and compared field by field with what was
// meant, including the edge cases of the encoding (zero values, negative numbers, lengths that need more than one
// byte, 64-bit extremes, per-batch constant columns).
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "preload/byte_buffer.h"
#include "preload/event_record.h"
#include "preload/module_map.h"
#include "preload/stack_table.h"
#include "preload/trace_writer.h"
#include "proto/crc32c.h"
#include "proto/format.h"
#include "proto/trace.pb.h"

namespace cumemtrace::preload {
namespace {

using format::Api;

class EncoderConformance : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(buffer_.Init(1 << 16)); }
  void TearDown() override { buffer_.Release(); }

  // Parses the buffer as a Trace and returns its only packet.
  cumemtrace::format::Packet OnlyPacket() {
    cumemtrace::format::Trace trace;
    EXPECT_TRUE(trace.ParseFromArray(buffer_.data(), static_cast<int>(buffer_.size())));
    EXPECT_EQ(trace.packet_size(), 1);
    return trace.packet_size() == 1 ? trace.packet(0) : cumemtrace::format::Packet();
  }

  ByteBuffer buffer_;
};

TEST_F(EncoderConformance, Header) {
  const char* argv[] = {"python", "train.py", ""};
  HeaderInfo h{};
  h.tool_version = "0.1.0";
  h.pid = 4242;
  h.ppid = -1;  // negative int32: ten bytes on the wire
  h.argv = argv;
  h.argc = 3;
  h.hostname = "gpu-host";
  h.executable = "/usr/bin/python3.12";
  h.start_time_ns = std::numeric_limits<int64_t>::max();
  h.start_unix_time_ns = 1795000000123456789;
  h.driver_version = 13000;
  h.stack_depth = 64;
  h.torch_stack_depth = 32;
  ASSERT_TRUE(WriteHeader(&buffer_, h));
  auto p = OnlyPacket();
  ASSERT_TRUE(p.has_header());
  const auto& got = p.header();
  EXPECT_EQ(got.magic(), format::kMagic);
  EXPECT_EQ(got.format_version(), format::kFormatVersion);
  EXPECT_EQ(got.tool_version(), "0.1.0");
  EXPECT_EQ(got.pid(), 4242);
  EXPECT_EQ(got.ppid(), -1);
  ASSERT_EQ(got.argv_size(), 3);
  EXPECT_EQ(got.argv(0), "python");
  EXPECT_EQ(got.argv(1), "train.py");
  EXPECT_EQ(got.argv(2), "");
  EXPECT_EQ(got.hostname(), "gpu-host");
  EXPECT_EQ(got.executable(), "/usr/bin/python3.12");
  EXPECT_EQ(got.clock_id(), 1u);
  EXPECT_EQ(got.start_time_ns(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(got.start_unix_time_ns(), 1795000000123456789);
  EXPECT_EQ(got.driver_version(), 13000);
  EXPECT_EQ(got.stack_depth(), 64u);
  EXPECT_EQ(got.torch_stack_depth(), 32u);
}

// The copy of the header a reader uses when the header is damaged: only the fields it needs, magic first (the reader
// looks for its framing and the magic's bytes), at most 127 bytes even with every field at its widest.
TEST_F(EncoderConformance, HeaderCopy) {
  const char* argv[] = {"python", "train.py"};
  HeaderInfo h{};
  h.tool_version = "0.1.0";
  h.pid = std::numeric_limits<int32_t>::min();
  h.ppid = -1;
  h.argv = argv;
  h.argc = 2;
  h.hostname = "gpu-host";
  h.executable = "/usr/bin/python3.12";
  h.start_time_ns = std::numeric_limits<int64_t>::min();
  h.start_unix_time_ns = std::numeric_limits<int64_t>::max();
  h.driver_version = -1;
  h.stack_depth = std::numeric_limits<uint32_t>::max();
  h.torch_stack_depth = std::numeric_limits<uint32_t>::max();
  h.rank = h.local_rank = h.world_size = std::numeric_limits<int32_t>::max();
  h.forked_child = h.python_frames_enabled = h.cupti_enabled = true;
  ASSERT_TRUE(WriteHeaderCopy(&buffer_, h));
  EXPECT_LE(buffer_.size(), 127u);
  const uint8_t* b = buffer_.data();
  EXPECT_EQ(b[0], 0x0a);
  EXPECT_EQ(b[1], buffer_.size() - 2);
  EXPECT_EQ(b[2], (format::field::packet::kHeaderCopy << 3) | 2);
  EXPECT_EQ(b[3], buffer_.size() - 4);
  EXPECT_EQ(b[4], 0x09);
  EXPECT_EQ(std::memcmp(b + 5, &format::kMagic, 8), 0);
  auto p = OnlyPacket();
  ASSERT_TRUE(p.has_header_copy());
  const auto& got = p.header_copy();
  EXPECT_EQ(got.magic(), format::kMagic);
  EXPECT_EQ(got.format_version(), format::kFormatVersion);
  EXPECT_EQ(got.pid(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(got.ppid(), -1);
  EXPECT_EQ(got.clock_id(), 1u);
  EXPECT_EQ(got.start_time_ns(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(got.start_unix_time_ns(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(got.driver_version(), -1);
  EXPECT_EQ(got.stack_depth(), std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(got.torch_stack_depth(), std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(got.rank(), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(got.world_size(), std::numeric_limits<int32_t>::max());
  EXPECT_TRUE(got.forked_child() && got.python_frames_enabled() && got.cupti_enabled());
  // Never what is private or long.
  EXPECT_EQ(got.argv_size(), 0);
  EXPECT_TRUE(got.hostname().empty());
  EXPECT_TRUE(got.executable().empty());
  EXPECT_TRUE(got.tool_version().empty());
}

TEST_F(EncoderConformance, DeviceThreadModule) {
  uint8_t uuid[16];
  for (int i = 0; i < 16; ++i) uuid[i] = static_cast<uint8_t>(0xf0 + i);
  DeviceRecord d{0, "NVIDIA H100 80GB HBM3", uuid, 16, 85045477376ull, 13000};
  ASSERT_TRUE(WriteDevice(&buffer_, d));
  ASSERT_TRUE(WriteDevice(&buffer_, DeviceRecord{-1, "host", nullptr, 0, 0, 0}));
  ASSERT_TRUE(WriteThread(&buffer_, 7, 123456, "pt_data_pin"));
  ModuleEntry m;
  std::memset(&m, 0, sizeof(m));
  m.id = 3;
  std::strcpy(m.path, "/usr/lib/libc10_cuda.so");
  m.load_bias = 0x7f0000000000;
  m.start = 0x7f0000001000;
  m.end = 0x7f0000200000;
  m.build_id_size = 20;
  for (int i = 0; i < 20; ++i) m.build_id[i] = static_cast<uint8_t>(i * 13);
  ASSERT_TRUE(WriteModule(&buffer_, m));

  cumemtrace::format::Trace trace;
  ASSERT_TRUE(trace.ParseFromArray(buffer_.data(), static_cast<int>(buffer_.size())));
  ASSERT_EQ(trace.packet_size(), 4);
  const auto& dev = trace.packet(0).device();
  EXPECT_EQ(dev.ordinal(), 0);
  EXPECT_EQ(dev.name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(dev.uuid(), std::string(reinterpret_cast<char*>(uuid), 16));
  EXPECT_EQ(dev.total_memory(), 85045477376ull);
  EXPECT_EQ(dev.driver_version(), 13000);
  EXPECT_EQ(trace.packet(1).device().ordinal(), -1);
  EXPECT_EQ(trace.packet(1).device().name(), "host");
  const auto& th = trace.packet(2).thread();
  EXPECT_EQ(th.index(), 7u);
  EXPECT_EQ(th.tid(), 123456);
  EXPECT_EQ(th.name(), "pt_data_pin");
  const auto& mod = trace.packet(3).module();
  EXPECT_EQ(mod.id(), 3u);
  EXPECT_EQ(mod.path(), "/usr/lib/libc10_cuda.so");
  EXPECT_EQ(mod.load_bias(), 0x7f0000000000u);
  EXPECT_EQ(mod.start(), 0x7f0000001000u);
  EXPECT_EQ(mod.end(), 0x7f0000200000u);
  EXPECT_EQ(mod.build_id(), std::string(reinterpret_cast<char*>(m.build_id), 20));
}

TEST_F(EncoderConformance, StackNodesMatchTheTable) {
  StackTable table;
  // Two stacks sharing their two outermost frames; large pcs need ten-byte varints in the packed arrays.
  const uintptr_t a[] = {0xffffffffffff0001ull, 0x7f00000000a2, 0x401000};
  const uintptr_t b[] = {0x7f00000000b1, 0x7f00000000a2, 0x401000};
  uint64_t id_a = table.Intern(a, 3);
  uint64_t id_b = table.Intern(b, 3);
  ASSERT_EQ(table.node_count(), 4u);
  ASSERT_TRUE(WriteStackNodes(&buffer_, table, 1, table.next_id()));
  auto p = OnlyPacket();
  const auto& nodes = p.stack_nodes();
  EXPECT_EQ(nodes.first_id(), 1u);
  ASSERT_EQ(nodes.parent_size(), 4);
  ASSERT_EQ(nodes.pc_size(), 4);
  auto walk = [&](uint64_t id) {
    std::vector<uint64_t> pcs;
    while (id != 0) {
      pcs.push_back(nodes.pc(static_cast<int>(id - 1)));
      id = nodes.parent(static_cast<int>(id - 1));
    }
    return pcs;
  };
  EXPECT_EQ(walk(id_a), std::vector<uint64_t>(a, a + 3));
  EXPECT_EQ(walk(id_b), std::vector<uint64_t>(b, b + 3));
  table.Reset();
}

TEST_F(EncoderConformance, StringsAndSymbols) {
  const char* names[] = {"_ZN3c104cuda20CUDACachingAllocator6mallocEPPvim", "main"};
  ASSERT_TRUE(WriteStrings(&buffer_, 1, names, 2));
  const uint64_t pcs[] = {0x401000, 0x7fffffffffff};
  const uint32_t functions[] = {2, 0};
  const uint32_t modules[] = {1, 300};
  const uint64_t offsets[] = {0x10, 0};
  ASSERT_TRUE(WriteSymbols(&buffer_, pcs, functions, modules, offsets, nullptr, nullptr, 2));
  cumemtrace::format::Trace trace;
  ASSERT_TRUE(trace.ParseFromArray(buffer_.data(), static_cast<int>(buffer_.size())));
  ASSERT_EQ(trace.packet_size(), 2);
  const auto& s = trace.packet(0).strings();
  EXPECT_EQ(s.first_id(), 1u);
  ASSERT_EQ(s.value_size(), 2);
  EXPECT_EQ(s.value(0), names[0]);
  EXPECT_EQ(s.value(1), "main");
  const auto& sym = trace.packet(1).symbols();
  ASSERT_EQ(sym.pc_size(), 2);
  EXPECT_EQ(sym.pc(1), 0x7fffffffffffu);
  EXPECT_EQ(sym.function(0), 2u);
  EXPECT_EQ(sym.function(1), 0u);
  EXPECT_EQ(sym.module(1), 300u);
  EXPECT_EQ(sym.offset(0), 0x10u);
  EXPECT_EQ(sym.file_size(), 0);  // no debug info: the columns are left out
  EXPECT_EQ(sym.line_size(), 0);
}

TEST_F(EncoderConformance, SymbolsWithFilesAndLines) {
  const uint64_t pcs[] = {0x401000, 0x402000};
  const uint32_t functions[] = {1, 2};
  const uint32_t modules[] = {1, 1};
  const uint64_t offsets[] = {4, 0};
  const uint32_t files[] = {3, 0};
  const uint32_t lines[] = {42, 0};
  ASSERT_TRUE(WriteSymbols(&buffer_, pcs, functions, modules, offsets, files, lines, 2));
  cumemtrace::format::Trace trace;
  ASSERT_TRUE(trace.ParseFromArray(buffer_.data(), static_cast<int>(buffer_.size())));
  const auto& sym = trace.packet(0).symbols();
  ASSERT_EQ(sym.file_size(), 2);
  ASSERT_EQ(sym.line_size(), 2);
  EXPECT_EQ(sym.file(0), 3u);
  EXPECT_EQ(sym.line(0), 42u);
  EXPECT_EQ(sym.file(1), 0u);
  EXPECT_EQ(sym.line(1), 0u);
}

EventRecord Event(uint64_t seq, int64_t time, Api api, uint64_t address, uint64_t size) {
  EventRecord e{};
  e.seq = seq;
  e.time_ns = time;
  e.api = static_cast<uint16_t>(api);
  e.address = address;
  e.size = size;
  e.stack = 5;
  e.thread = 1;
  e.device = 0;
  return e;
}

// The address column drops the low zero bits all addresses of a batch share, and gives every address back exactly:
// deltas down and up, across the top of the address space, and with one odd address no shift at all.
TEST_F(EncoderConformance, EventBatchAddressShift) {
  const std::vector<std::vector<uint64_t>> batches = {
      {0x7f3a00000000, 0x7f3a00000200, 0x7f39ffe00000, 0x200, 0xfffffffffffffe00, 0x7f3a00000200},
      {0x7f3a00000000, 0x7f3a00000201, 0x7f3a00000000},
      {0, 0}};
  const std::vector<uint64_t> want_shift = {9, 0, 0};
  for (size_t k = 0; k < batches.size(); ++k) {
    buffer_.Clear();
    std::vector<EventRecord> ev;
    for (size_t i = 0; i < batches[k].size(); ++i) {
      ev.push_back(Event(1 + i, 100 * i, Api::kTorchAlloc, batches[k][i], 512));
    }
    ASSERT_TRUE(WriteEventBatch(&buffer_, ev.data(), ev.size(), /*complete_below=*/1));
    auto p = OnlyPacket();
    const auto& b = p.events();
    EXPECT_EQ(b.address_shift(), want_shift[k]) << k;
    ASSERT_EQ(b.address_delta_size(), static_cast<int>(ev.size()));
    uint64_t address = 0;
    for (int i = 0; i < b.address_delta_size(); ++i) {
      address += static_cast<uint64_t>(b.address_delta(i)) << b.address_shift();
      EXPECT_EQ(address, ev[i].address) << k << " row " << i;
    }
  }
}

TEST_F(EncoderConformance, EventBatchColumns) {
  std::vector<EventRecord> ev;
  ev.push_back(Event(10, 1000, Api::kCudaMalloc, 0x7f0000000000, 1 << 20));
  ev.push_back(Event(12, 900, Api::kCuMemAllocAsync, 0x7f0000100000, 300));  // time goes back, seq skips
  ev.back().stream = 0xdeadbeef;
  ev.back().thread = 2;
  ev.push_back(Event(11, 2000, Api::kCuMemFree, 0x7f0000000000, 0));
  ev.back().device = -1;
  ev.push_back(Event(13, 2500, Api::kCuMemMap, 0x10000, 4096));
  ev.back().aux = 77;
  ev.push_back(Event(14, 3000, Api::kCuMemAlloc, 0, 1ull << 50));
  ev.back().result = 2;
  ev.back().has_mem_info = true;
  ev.back().free_bytes = 123;
  ev.back().total_bytes = 456;
  ev.back().stack = 9;
  ASSERT_TRUE(WriteEventBatch(&buffer_, ev.data(), ev.size(), /*complete_below=*/11));
  auto p = OnlyPacket();
  ASSERT_TRUE(p.has_events());
  const auto& b = p.events();
  EXPECT_EQ(b.complete_below(), 11u);
  EXPECT_EQ(b.address_shift(), 16u);  // every address is a multiple of 0x10000 (0 included)
  EXPECT_EQ(b.first_seq(), 10u);
  EXPECT_EQ(b.base_time_ns(), 1000);
  ASSERT_EQ(b.api_size(), 5);
  ASSERT_EQ(b.seq_delta_size(), 5);
  ASSERT_EQ(b.time_delta_ns_size(), 5);
  uint64_t seq = b.first_seq();
  int64_t time = b.base_time_ns();
  uint64_t address = 0;
  for (int i = 0; i < 5; ++i) {
    seq += b.seq_delta(i);
    time += b.time_delta_ns(i);
    address += static_cast<uint64_t>(b.address_delta(i)) << b.address_shift();
    EXPECT_EQ(seq, ev[i].seq) << i;
    EXPECT_EQ(time, ev[i].time_ns) << i;
    EXPECT_EQ(address, ev[i].address) << i;
    EXPECT_EQ(b.api(i), ev[i].api) << i;
  }
  // size: the four allocating rows; stream: the async row; aux: the map row.
  ASSERT_EQ(b.size_size(), 4);
  EXPECT_EQ(b.size(0), 1u << 20);
  EXPECT_EQ(b.size(1), 300u);
  EXPECT_EQ(b.size(2), 4096u);
  EXPECT_EQ(b.size(3), 1ull << 50);
  ASSERT_EQ(b.stream_size(), 1);
  EXPECT_EQ(b.stream(0), 0xdeadbeefu);
  ASSERT_EQ(b.aux_size(), 1);
  EXPECT_EQ(b.aux(0), 77u);
  ASSERT_EQ(b.stack_size(), 5);
  EXPECT_EQ(b.stack(4), 9u);
  ASSERT_EQ(b.thread_size(), 5);
  EXPECT_EQ(b.thread(1), 2u);
  ASSERT_EQ(b.device_size(), 5);
  EXPECT_EQ(b.device(2), -1);
  ASSERT_EQ(b.failures_size(), 1);
  EXPECT_EQ(b.failures(0).row(), 4u);
  EXPECT_EQ(b.failures(0).result(), 2);
  EXPECT_TRUE(b.failures(0).has_mem_info());
  EXPECT_EQ(b.failures(0).free_bytes(), 123u);
  EXPECT_EQ(b.failures(0).total_bytes(), 456u);
}

// Format version 6 (CUMEMTRACE_TIME_RESOLUTION): times are rounded down to the origin plus a multiple of the unit,
// also before the origin, and the deltas are in units. The origin is not a multiple of the unit, so rounding from 0
// would give other times.
TEST_F(EncoderConformance, EventBatchTimeUnitRoundsDownFromTheOrigin) {
  constexpr int64_t kOrigin = 1'000'000'123;
  constexpr uint64_t kUnit = 1000;
  const std::vector<std::pair<int64_t, int64_t>> times = {  // {recorded, written}, relative to the origin
      {4999, 4000}, {7000, 7000}, {-1, -1000}, {-2500, -3000}, {0, 0}, {999, 0}};
  std::vector<EventRecord> ev;
  for (size_t i = 0; i < times.size(); ++i) {
    ev.push_back(Event(1 + i, kOrigin + times[i].first, Api::kCuMemAlloc, 0x200000 * (i + 1), 64));
  }
  ASSERT_TRUE(WriteEventBatch(&buffer_, ev.data(), ev.size(), /*complete_below=*/1, kUnit, kOrigin));
  const auto b = OnlyPacket().events();
  EXPECT_EQ(b.time_unit_ns(), kUnit);
  EXPECT_EQ(b.base_time_ns(), kOrigin + 4000);
  ASSERT_EQ(b.time_delta_ns_size(), static_cast<int>(times.size()));
  int64_t time = b.base_time_ns();
  for (int i = 0; i < b.time_delta_ns_size(); ++i) {
    time += b.time_delta_ns(i) * static_cast<int64_t>(kUnit);
    EXPECT_EQ(time, kOrigin + times[i].second) << i;
  }
}

// The streamed batches' checksum is the standard CRC-32C (its check value, and RFC 3720's test vectors).
TEST(Crc32c, StandardCheckValues) {
  const std::string digits = "123456789";
  EXPECT_EQ(format::Crc32c(digits.data(), digits.size()), 0xe3069283u);
  const std::vector<uint8_t> zeros(32, 0), ones(32, 0xff);
  EXPECT_EQ(format::Crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  EXPECT_EQ(format::Crc32c(ones.data(), ones.size()), 0x62a8ab43u);
  std::vector<uint8_t> ascending(32);
  for (size_t i = 0; i < ascending.size(); ++i) ascending[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(format::Crc32c(ascending.data(), ascending.size()), 0x46dd794eu);
  EXPECT_EQ(format::Crc32c(nullptr, 0), 0u);
}

TEST_F(EncoderConformance, ConstantColumnsAreWrittenOnceAndContiguousSeqOmitted) {
  std::vector<EventRecord> ev;
  for (int i = 0; i < 300; ++i) ev.push_back(Event(100 + i, 10 * i, Api::kCuMemAlloc, 0x1000 * (i + 1), 64));
  ev[0].result = -1;  // negative results survive (int32 sign extension)
  ASSERT_TRUE(WriteEventBatch(&buffer_, ev.data(), ev.size()));
  auto p = OnlyPacket();
  const auto& b = p.events();
  EXPECT_EQ(b.seq_delta_size(), 0);
  EXPECT_EQ(b.api_size(), 300);
  EXPECT_EQ(b.stack_size(), 1);
  EXPECT_EQ(b.thread_size(), 1);
  EXPECT_EQ(b.device_size(), 1);
  EXPECT_EQ(b.stack(0), 5u);
  ASSERT_EQ(b.failures_size(), 1);
  EXPECT_EQ(b.failures(0).row(), 0u);
  EXPECT_EQ(b.failures(0).result(), -1);
  EXPECT_FALSE(b.failures(0).has_mem_info());
}

TEST_F(EncoderConformance, TrailerAndLongFields) {
  TrailerRecord t{};
  t.events = 1;
  t.dropped_events = 2;
  t.unwind_failures = 3;
  t.truncated_stacks = 4;
  t.bytes_written = ~0ull;
  t.stack_nodes = 6;
  t.wrapper_slots_exhausted = 7;
  t.end_time_ns = -8;
  t.recorder_time_ns = 9;
  t.flushes = 10;
  ASSERT_TRUE(WriteTrailer(&buffer_, t));
  // A string long enough that its length and the enclosing lengths need several varint bytes.
  std::string long_name(100000, 'x');
  ASSERT_TRUE(WriteThread(&buffer_, 1, 1, long_name.c_str()));
  cumemtrace::format::Trace trace;
  ASSERT_TRUE(trace.ParseFromArray(buffer_.data(), static_cast<int>(buffer_.size())));
  ASSERT_EQ(trace.packet_size(), 2);
  const auto& tr = trace.packet(0).trailer();
  EXPECT_EQ(tr.events(), 1u);
  EXPECT_EQ(tr.dropped_events(), 2u);
  EXPECT_EQ(tr.unwind_failures(), 3u);
  EXPECT_EQ(tr.truncated_stacks(), 4u);
  EXPECT_EQ(tr.bytes_written(), ~0ull);
  EXPECT_EQ(tr.stack_nodes(), 6u);
  EXPECT_EQ(tr.wrapper_slots_exhausted(), 7u);
  EXPECT_EQ(tr.end_time_ns(), -8);
  EXPECT_EQ(tr.recorder_time_ns(), 9u);
  EXPECT_EQ(tr.flushes(), 10u);
  EXPECT_EQ(trace.packet(1).thread().name(), long_name);
}

// The fields added for ranks, forked children, Python and CUPTI: present when set, absent (not -1 on the wire) when
// the launcher set no rank, and rank 0 written although it is the default value.
TEST_F(EncoderConformance, HeaderRankForkAndSourceFields) {
  const char* argv[] = {"python"};
  HeaderInfo h{};
  h.tool_version = "0.1.0";
  h.pid = 7;
  h.ppid = 6;
  h.argv = argv;
  h.argc = 1;
  h.hostname = "h";
  h.executable = "/x";
  h.rank = 0;
  h.local_rank = 3;
  h.world_size = -1;
  h.forked_child = true;
  h.python_frames_enabled = true;
  h.cupti_enabled = true;
  ASSERT_TRUE(WriteHeader(&buffer_, h));
  auto got = OnlyPacket().header();
  EXPECT_TRUE(got.has_rank());
  EXPECT_EQ(got.rank(), 0);
  EXPECT_TRUE(got.has_local_rank());
  EXPECT_EQ(got.local_rank(), 3);
  EXPECT_FALSE(got.has_world_size());
  EXPECT_TRUE(got.forked_child());
  EXPECT_EQ(got.ppid(), 6);
  EXPECT_TRUE(got.python_frames_enabled());
  EXPECT_TRUE(got.cupti_enabled());

  buffer_.Clear();
  h.rank = h.local_rank = h.world_size = -1;
  h.forked_child = h.python_frames_enabled = h.cupti_enabled = false;
  ASSERT_TRUE(WriteHeader(&buffer_, h));
  got = OnlyPacket().header();
  EXPECT_FALSE(got.has_rank());
  EXPECT_FALSE(got.has_local_rank());
  EXPECT_FALSE(got.has_world_size());
  EXPECT_FALSE(got.forked_child());
  EXPECT_FALSE(got.cupti_enabled());
}

TEST_F(EncoderConformance, MemorySampleAndNotice) {
  MemorySampleRecord m{};
  m.time_ns = -5;
  m.device = 3;
  m.free_bytes = ~0ull;
  m.total_bytes = 80ull << 30;
  m.after_seq = 1234567;
  ASSERT_TRUE(WriteMemorySample(&buffer_, m));
  ASSERT_TRUE(WriteNotice(&buffer_, static_cast<uint32_t>(format::NoticeCode::kCuptiOnlyEvent),
                          "first memory call seen only by CUPTI: cuMemAlloc", 99));
  cumemtrace::format::Trace trace;
  ASSERT_TRUE(trace.ParseFromArray(buffer_.data(), static_cast<int>(buffer_.size())));
  ASSERT_EQ(trace.packet_size(), 2);
  ASSERT_TRUE(trace.packet(0).has_memory_sample());
  const auto& s = trace.packet(0).memory_sample();
  EXPECT_EQ(s.time_ns(), -5);
  EXPECT_EQ(s.device(), 3);
  EXPECT_EQ(s.free_bytes(), ~0ull);
  EXPECT_EQ(s.total_bytes(), 80ull << 30);
  EXPECT_EQ(s.after_seq(), 1234567u);
  ASSERT_TRUE(trace.packet(1).has_notice());
  const auto& n = trace.packet(1).notice();
  EXPECT_EQ(n.code(), cumemtrace::format::Notice::CUPTI_ONLY_EVENT);
  EXPECT_EQ(n.message(), "first memory call seen only by CUPTI: cuMemAlloc");
  EXPECT_EQ(n.time_ns(), 99);
  static_assert(static_cast<int>(format::NoticeCode::kCuptiUnavailable) ==
                cumemtrace::format::Notice::CUPTI_UNAVAILABLE);
  static_assert(static_cast<int>(format::NoticeCode::kWriteFailed) == cumemtrace::format::Notice::WRITE_FAILED);
}

// A list of a GPU's processes: every field, a command longer than one length byte can hold with the rest, a
// process whose memory NVML could not say; and a list that is only an error.
TEST_F(EncoderConformance, GpuProcesses) {
  GpuProcessesRecord list{};
  list.time_ns = 123456789;
  list.after_seq = 4242;
  list.device = 1;
  list.reason = 2;
  list.pids = 1;
  list.count = 3;
  list.process[0] = {818, 64403537920ull, false, false, ""};
  std::string command(150, 'x');
  memcpy(list.process[0].command, command.c_str(), command.size() + 1);
  list.process[1] = {853, 19876560896ull, false, true, "python3 victim.py"};
  list.process[2] = {4000000000u, 0, true, false, ""};
  ASSERT_TRUE(WriteGpuProcesses(&buffer_, list));
  GpuProcessesRecord failed{};
  failed.device = 0;
  failed.reason = 1;
  snprintf(failed.error, sizeof(failed.error), "libnvidia-ml.so.1 could not be loaded");
  ASSERT_TRUE(WriteGpuProcesses(&buffer_, failed));
  cumemtrace::format::Trace trace;
  ASSERT_TRUE(trace.ParseFromArray(buffer_.data(), static_cast<int>(buffer_.size())));
  ASSERT_EQ(trace.packet_size(), 2);
  ASSERT_TRUE(trace.packet(0).has_gpu_processes());
  const auto& g = trace.packet(0).gpu_processes();
  EXPECT_EQ(g.time_ns(), 123456789);
  EXPECT_EQ(g.after_seq(), 4242u);
  EXPECT_EQ(g.device(), 1);
  EXPECT_EQ(g.reason(), cumemtrace::format::GpuProcesses::FAILED_ALLOCATION);
  EXPECT_EQ(g.pids(), cumemtrace::format::GpuProcesses::PIDS_SAME);
  ASSERT_EQ(g.process_size(), 3);
  EXPECT_EQ(g.process(0).pid(), 818u);
  EXPECT_EQ(g.process(0).used_bytes(), 64403537920ull);
  EXPECT_EQ(g.process(0).command(), command);
  EXPECT_FALSE(g.process(0).self());
  EXPECT_TRUE(g.process(1).self());
  EXPECT_EQ(g.process(1).command(), "python3 victim.py");
  EXPECT_EQ(g.process(2).pid(), 4000000000u);
  EXPECT_TRUE(g.process(2).used_unknown());
  EXPECT_EQ(g.error(), "");
  const auto& e = trace.packet(1).gpu_processes();
  EXPECT_EQ(e.reason(), cumemtrace::format::GpuProcesses::SAMPLE);
  EXPECT_EQ(e.process_size(), 0);
  EXPECT_EQ(e.error(), "libnvidia-ml.so.1 could not be loaded");
}

TEST_F(EncoderConformance, CuptiRowsAndNewTrailerCounters) {
  std::vector<EventRecord> ev;
  for (int i = 0; i < 4; ++i) {
    ev.push_back(Event(20 + i, 100 * i, Api::kCuMemAlloc, 0x1000 * (i + 1), 512));
    ev.back().cupti_only = i == 1 || i == 3;
  }
  ASSERT_TRUE(WriteEventBatch(&buffer_, ev.data(), ev.size()));
  auto p = OnlyPacket();
  ASSERT_EQ(p.events().cupti_rows_size(), 2);
  EXPECT_EQ(p.events().cupti_rows(0), 1u);
  EXPECT_EQ(p.events().cupti_rows(1), 3u);

  buffer_.Clear();
  for (EventRecord& e : ev) e.cupti_only = false;
  ASSERT_TRUE(WriteEventBatch(&buffer_, ev.data(), ev.size()));
  EXPECT_EQ(OnlyPacket().events().cupti_rows_size(), 0);

  buffer_.Clear();
  TrailerRecord t{};
  t.python_stacks = 11;
  t.python_failures = 12;
  t.memory_samples = 13;
  t.cupti_only_events = 14;
  t.dropped_frames = 17;
  t.recorder_python_ns = 18;
  t.recorder_unwind_ns = 19;
  t.recorder_lock_wait_ns = 20;
  t.recorder_stack_ns = 21;
  t.writer_time_ns = 22;
  t.stalled_seals = 23;
  t.clock_calibrations = 24;
  t.clock_max_error_ns = 25;
  t.clock_steps = 26;
  t.recorder_prologue_ns = 27;
  t.recorder_append_ns = 28;
  ASSERT_TRUE(WriteTrailer(&buffer_, t));
  const auto tr = OnlyPacket().trailer();
  EXPECT_EQ(tr.python_stacks(), 11u);
  EXPECT_EQ(tr.python_failures(), 12u);
  EXPECT_EQ(tr.memory_samples(), 13u);
  EXPECT_EQ(tr.cupti_only_events(), 14u);
  EXPECT_EQ(tr.dropped_frames(), 17u);
  EXPECT_EQ(tr.recorder_python_ns(), 18u);
  EXPECT_EQ(tr.recorder_unwind_ns(), 19u);
  EXPECT_EQ(tr.recorder_lock_wait_ns(), 20u);
  EXPECT_EQ(tr.recorder_stack_ns(), 21u);
  EXPECT_EQ(tr.writer_time_ns(), 22u);
  EXPECT_EQ(tr.stalled_seals(), 23u);
  EXPECT_EQ(tr.clock_calibrations(), 24u);
  EXPECT_EQ(tr.clock_max_error_ns(), 25u);
  EXPECT_EQ(tr.clock_steps(), 26u);
  EXPECT_EQ(tr.recorder_prologue_ns(), 27u);
  EXPECT_EQ(tr.recorder_append_ns(), 28u);
}

TEST_F(EncoderConformance, TorchAllocatorEventsAttachAndCounters) {
  // One row of each TORCH_* api: the size, stream and aux columns hold exactly the rows format.h's table gives them.
  std::vector<EventRecord> ev;
  const Api apis[9] = {Api::kTorchSegmentAlloc, Api::kTorchAlloc,       Api::kTorchFreeRequested,
                      Api::kTorchFreeCompleted, Api::kTorchSegmentMap, Api::kTorchSegmentUnmap,
                      Api::kTorchSegmentFree,  Api::kTorchOom,         Api::kTorchFree};
  for (int i = 0; i < 9; ++i) {
    ev.push_back(Event(40 + i, 10 * i, apis[i], 0x7f0000000000ull + 0x200 * i, 1000 + i));
    ev.back().stream = 0x5000 + i;
    ev.back().aux = 77 + i;
  }
  ASSERT_TRUE(WriteEventBatch(&buffer_, ev.data(), ev.size()));
  const auto b = OnlyPacket().events();
  std::vector<uint64_t> sizes(b.size().begin(), b.size().end());
  std::vector<uint64_t> streams(b.stream().begin(), b.stream().end());
  std::vector<uint64_t> aux(b.aux().begin(), b.aux().end());
  EXPECT_EQ(sizes, (std::vector<uint64_t>{1000, 1001, 1004, 1005, 1006, 1007}));
  EXPECT_EQ(streams, (std::vector<uint64_t>{0x5000, 0x5001, 0x5004, 0x5005, 0x5006, 0x5007}));
  EXPECT_EQ(aux, (std::vector<uint64_t>{84}));
  ASSERT_EQ(b.api_size(), 9);
  EXPECT_EQ(b.api(8), static_cast<uint32_t>(cumemtrace::format::TORCH_FREE));
  EXPECT_EQ(b.api(1), static_cast<uint32_t>(cumemtrace::format::TORCH_ALLOC));
  EXPECT_EQ(b.api(7), static_cast<uint32_t>(cumemtrace::format::TORCH_OOM));

  buffer_.Clear();
  AllocatorAttachRecord a{};
  a.after_seq = 4242;
  a.time_ns = -7;
  a.library = "/opt/torch/lib/libc10_cuda.so";
  a.devices = 8;
  a.config = "expandable_segments:True";
  a.at_first_segment = true;
  ASSERT_TRUE(WriteAllocatorAttach(&buffer_, a));
  ASSERT_TRUE(WriteNotice(&buffer_, static_cast<uint32_t>(format::NoticeCode::kTorchAllocatorIgnored), "x", 1));
  cumemtrace::format::Trace trace;
  ASSERT_TRUE(trace.ParseFromArray(buffer_.data(), static_cast<int>(buffer_.size())));
  ASSERT_EQ(trace.packet_size(), 2);
  ASSERT_TRUE(trace.packet(0).has_allocator_attach());
  const auto& got = trace.packet(0).allocator_attach();
  EXPECT_EQ(got.after_seq(), 4242u);
  EXPECT_EQ(got.time_ns(), -7);
  EXPECT_EQ(got.library(), "/opt/torch/lib/libc10_cuda.so");
  EXPECT_EQ(got.devices(), 8u);
  EXPECT_EQ(got.config(), "expandable_segments:True");
  EXPECT_TRUE(got.at_first_segment());
  EXPECT_EQ(trace.packet(1).notice().code(), cumemtrace::format::Notice::TORCH_ALLOCATOR_IGNORED);
  static_assert(static_cast<int>(format::NoticeCode::kTorchAllocatorUnavailable) ==
                cumemtrace::format::Notice::TORCH_ALLOCATOR_UNAVAILABLE);

  buffer_.Clear();
  TrailerRecord t{};
  t.allocator_events = 15;
  t.allocator_ignored = 16;
  ASSERT_TRUE(WriteTrailer(&buffer_, t));
  const auto tr = OnlyPacket().trailer();
  EXPECT_EQ(tr.allocator_events(), 15u);
  EXPECT_EQ(tr.allocator_ignored(), 16u);
}

// Format version 2: thread and device as runs when that is shorter; the stack column only over rows with a stack.
TEST_F(EncoderConformance, RunsAndStackRows) {
  std::vector<EventRecord> ev;
  for (int i = 0; i < 20; ++i) {
    ev.push_back(Event(100 + i, i, i % 2 == 0 ? Api::kTorchAlloc : Api::kTorchFree, 0x1000 + 0x100 * i, 64));
    ev.back().thread = i < 12 ? 1 : 2;   // two runs: 12 + 8
    ev.back().device = i < 19 ? 0 : 1;  // two runs: 19 + 1
    ev.back().stack = i % 2 == 0 ? 10 + static_cast<uint64_t>(i) : 0;
  }
  ASSERT_TRUE(WriteEventBatch(&buffer_, ev.data(), ev.size()));
  const auto b = OnlyPacket().events();
  EXPECT_EQ(std::vector<uint32_t>(b.thread().begin(), b.thread().end()), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(std::vector<uint32_t>(b.thread_runs().begin(), b.thread_runs().end()), (std::vector<uint32_t>{12, 8}));
  EXPECT_EQ(std::vector<int32_t>(b.device().begin(), b.device().end()), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(std::vector<uint32_t>(b.device_runs().begin(), b.device_runs().end()), (std::vector<uint32_t>{19, 1}));
  ASSERT_EQ(b.stack_size(), 10);  // the ten torch.alloc rows; torch.free has no stack
  EXPECT_EQ(b.stack(0), 10u);
  EXPECT_EQ(b.stack(9), 28u);

  // Many runs: one entry per row is shorter, and no run column is written.
  buffer_.Clear();
  for (size_t i = 0; i < ev.size(); ++i) ev[i].thread = static_cast<uint32_t>(i % 3);
  ASSERT_TRUE(WriteEventBatch(&buffer_, ev.data(), ev.size()));
  const auto c = OnlyPacket().events();
  EXPECT_EQ(c.thread_size(), 20);
  EXPECT_EQ(c.thread_runs_size(), 0);
}

// Every api of format.h's table has the same number in trace.proto's enum.
TEST(FormatTable, ApiValuesMatchTheSchema) {
  for (const format::ApiInfo& info : format::kApiTable) {
    EXPECT_TRUE(cumemtrace::format::ApiId_IsValid(static_cast<int>(info.api))) << info.name;
  }
  EXPECT_EQ(static_cast<int>(Api::kTorchOom), cumemtrace::format::TORCH_OOM);
}

}  // namespace
}  // namespace cumemtrace::preload
