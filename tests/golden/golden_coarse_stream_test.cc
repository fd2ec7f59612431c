// Every real trace in examples/, written again as the preload writes it with CUMEMTRACE_TIME_RESOLUTION=10us and
// its batches streamed (trace format 6): each event batch re-encoded by the preload's own encoder, times rounded
// down to the trace's start plus a multiple of 10 us, then compressed as parts of one zstd stream exactly as
// preload/batch_compression.cc does. The claim users rely on: that trace gives the same peak, leaks and oom reports
// as the full-resolution one of the same run, and is smaller.
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/types/span.h"
#include "analyzer/commands/console.h"
#include "analyzer/reader/event_batch_decoder.h"
#include "gtest/gtest.h"
#include "preload/byte_buffer.h"
#include "preload/event_record.h"
#include "preload/trace_writer.h"
#include "proto/format.h"
#include "proto/trace.pb.h"
#include "tests/golden/golden_support.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/json_value.h"

namespace cumemtrace::analyzer {
namespace {

using golden::ExampleTraces;
using test::JsonValue;

constexpr uint64_t kTimeUnitNs = 10000;  // CUMEMTRACE_TIME_RESOLUTION=10us
// preload/batch_compression.cc's frame length (kFrameInputBytes there): a frame ends once its batches reach it.
constexpr size_t kFrameInputBytes = size_t{4} << 20;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint64_t Varint(std::string_view bytes, size_t* pos) {
  uint64_t value = 0;
  for (int shift = 0; *pos < bytes.size() && shift < 64; shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(bytes[(*pos)++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) break;
  }
  return value;
}

std::string Framed(const format::Packet& packet) {
  format::Trace trace;
  *trace.add_packet() = packet;
  return trace.SerializeAsString();
}

// A file's packets, each as framed in the file (Trace field 1) and parsed.
struct RawPacket {
  std::string_view framed;
  format::Packet packet;
};

std::vector<RawPacket> SplitPackets(std::string_view bytes) {
  std::vector<RawPacket> packets;
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t start = pos++;
    const size_t length = Varint(bytes, &pos);
    RawPacket p{bytes.substr(start, pos + length - start), {}};
    EXPECT_TRUE(p.packet.ParseFromArray(bytes.data() + pos, static_cast<int>(length))) << "packet at " << start;
    packets.push_back(std::move(p));
    pos += length;
  }
  return packets;
}

// The EventBatch an events, events_zstd or events_stream packet holds (`stream`: the frame the latter is part of).
format::EventBatch Batch(const format::Packet& p, ZSTD_DCtx* stream) {
  if (p.has_events()) return p.events();
  std::string inflated;
  if (p.data_case() == format::Packet::kEventsZstd) {
    const unsigned long long size = ZSTD_getFrameContentSize(p.events_zstd().data(), p.events_zstd().size());
    EXPECT_LT(size, uint64_t{1} << 30) << "not a zstd frame that states its size";
    inflated.resize(size < (uint64_t{1} << 30) ? size : 0);
    EXPECT_EQ(ZSTD_decompress(inflated.data(), inflated.size(), p.events_zstd().data(), p.events_zstd().size()),
              inflated.size());
  } else {
    if (p.events_stream().part() == 0) ZSTD_DCtx_reset(stream, ZSTD_reset_session_only);
    ZSTD_inBuffer in{p.events_stream().zstd().data(), p.events_stream().zstd().size(), 0};
    char chunk[1 << 16];
    ZSTD_outBuffer out{chunk, sizeof(chunk), 0};
    do {  // a full chunk may leave output behind even when all input was read
      out.pos = 0;
      const size_t r = ZSTD_decompressStream(stream, &out, &in);
      EXPECT_FALSE(ZSTD_isError(r)) << ZSTD_getErrorName(r);
      if (ZSTD_isError(r)) break;
      inflated.append(chunk, out.pos);
    } while (in.pos < in.size || out.pos == out.size);
  }
  format::EventBatch batch;
  EXPECT_TRUE(batch.ParseFromString(inflated));
  return batch;
}

template <typename T>
absl::Span<const T> AsSpan(const google::protobuf::RepeatedField<T>& f) {
  return absl::MakeConstSpan(f.data(), static_cast<size_t>(f.size()));
}

// The batch's rows as the recorder buffers them, decoded by the analyzer's own column rules for `version`.
// `*lost_stacks` counts rows with a stack that a version-6 batch has no column entry for.
std::vector<preload::EventRecord> Rows(const format::EventBatch& b, uint32_t version, uint64_t* lost_stacks) {
  std::vector<FailureColumn> failures;
  for (const format::Failure& f : b.failures()) {
    failures.push_back({f.row(), f.result(), f.free_bytes(), f.total_bytes(), f.has_mem_info()});
  }
  BatchColumns c{.first_seq = b.first_seq(), .base_time_ns = b.base_time_ns(), .seq_delta = AsSpan(b.seq_delta()),
                 .time_delta_ns = AsSpan(b.time_delta_ns()), .api = AsSpan(b.api()),
                 .address_delta = AsSpan(b.address_delta()), .size = AsSpan(b.size()), .stack = AsSpan(b.stack()),
                 .thread = AsSpan(b.thread()), .device = AsSpan(b.device()), .stream = AsSpan(b.stream()),
                 .aux = AsSpan(b.aux()), .failures = failures, .cupti_rows = AsSpan(b.cupti_rows()),
                 .complete_below = b.complete_below(), .thread_runs = AsSpan(b.thread_runs()),
                 .device_runs = AsSpan(b.device_runs()), .address_shift = b.address_shift(),
                 .time_unit_ns = b.time_unit_ns(), .format_version = version};
  std::vector<Event> events;
  size_t n = 0;
  const absl::Status status = DecodeEventBatch(c, &events, &n);
  EXPECT_TRUE(status.ok()) << status;
  std::vector<preload::EventRecord> rows(n);
  for (size_t i = 0; i < n; ++i) {
    const Event& e = events[i];
    rows[i] = {.seq = e.seq, .time_ns = e.time_ns, .address = e.address, .size = e.size, .stream = e.stream,
               .aux = e.aux, .stack = e.stack, .free_bytes = e.free_bytes, .total_bytes = e.total_bytes,
               .device = e.device, .result = e.result, .thread = e.thread,
               .api = static_cast<uint16_t>(e.api), .has_mem_info = e.has_mem_info, .cupti_only = e.cupti_only};
    const bool has_column = e.info != nullptr && format::RowHasStack(*e.info, format::kFormatVersion);
    if (e.stack != 0 && !has_column) ++*lost_stacks;
  }
  return rows;
}

// The EventBatch bytes of one packet as preload::WriteEventBatch wrote it (what the preload compresses).
std::string EncodeBatch(const std::vector<preload::EventRecord>& rows, uint64_t complete_below, int64_t origin_ns) {
  preload::ByteBuffer buffer;
  EXPECT_TRUE(buffer.Init(1 << 16));
  EXPECT_TRUE(preload::WriteEventBatch(&buffer, rows.data(), rows.size(), complete_below, kTimeUnitNs, origin_ns));
  const std::string_view packet(reinterpret_cast<const char*>(buffer.data()), buffer.size());
  size_t pos = 1;  // [Trace.packet tag][length][Packet.events tag][length][EventBatch]
  Varint(packet, &pos);
  ++pos;
  Varint(packet, &pos);
  std::string batch(packet.substr(pos));
  buffer.Release();
  return batch;
}

// preload/batch_compression.cc's stream: one context at level 1 with checksums, flushed after each batch, a frame
// ended (and the next begun as part 0) once its batches reach kFrameInputBytes.
class StreamCompressor {
 public:
  StreamCompressor() : cctx_(ZSTD_createCCtx(), ZSTD_freeCCtx) {
    ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_checksumFlag, 1);
  }

  // The framed events_stream packet that holds `batch`.
  std::string Part(const std::string& batch) {
    if (next_part_ == 0) ZSTD_CCtx_reset(cctx_.get(), ZSTD_reset_session_only);
    frame_input_ += batch.size();
    const bool last = frame_input_ >= kFrameInputBytes;
    std::string compressed(ZSTD_compressBound(batch.size()) + 64, '\0');
    ZSTD_inBuffer in{batch.data(), batch.size(), 0};
    ZSTD_outBuffer out{compressed.data(), compressed.size(), 0};
    size_t remaining = 0;
    do {
      remaining = ZSTD_compressStream2(cctx_.get(), &out, &in, last ? ZSTD_e_end : ZSTD_e_flush);
      EXPECT_FALSE(ZSTD_isError(remaining)) << ZSTD_getErrorName(remaining);
    } while (!ZSTD_isError(remaining) && (remaining != 0 || in.pos < in.size));
    compressed.resize(out.pos);
    format::Packet packet;
    packet.mutable_events_stream()->set_part(next_part_);
    packet.mutable_events_stream()->set_zstd(compressed);
    next_part_ = last ? 0 : next_part_ + 1;
    if (last) frame_input_ = 0;
    return Framed(packet);
  }

 private:
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx_;
  uint32_t next_part_ = 0;
  size_t frame_input_ = 0;
};

struct Rewritten {
  std::string bytes;
  uint32_t original_version = 0;
  uint64_t original_time_unit_ns = 1;  // the coarsest unit of the original's batches
  uint64_t batches = 0;
  uint64_t lost_stacks = 0;
};

// `original` with every event packet re-encoded at 10 us and streamed, every other packet as it was, except the
// header and its copies, which say format version 6: the preload's encoder writes version 6's stack column (rows
// of segments PyTorch gives back have an entry from version 5 on; version 1 has one entry per row), and the stream
// and time unit are version 6's.
Rewritten Rewrite(const std::string& original) {
  Rewritten r;
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> inflate(ZSTD_createDCtx(), ZSTD_freeDCtx);
  StreamCompressor stream;
  int64_t origin_ns = 0;
  for (RawPacket& p : SplitPackets(original)) {
    format::Packet& packet = p.packet;
    switch (packet.data_case()) {
      case format::Packet::kHeader:
      case format::Packet::kHeaderCopy: {
        format::Header& h = packet.has_header() ? *packet.mutable_header() : *packet.mutable_header_copy();
        if (packet.has_header()) {
          r.original_version = h.format_version();
          origin_ns = h.start_time_ns();
        }
        h.set_format_version(format::kFormatVersion);
        r.bytes += Framed(packet);
        break;
      }
      case format::Packet::kEvents:
      case format::Packet::kEventsZstd:
      case format::Packet::kEventsStream: {
        const format::EventBatch batch = Batch(packet, inflate.get());
        r.original_time_unit_ns = std::max<uint64_t>(r.original_time_unit_ns, batch.time_unit_ns());
        const auto rows = Rows(batch, r.original_version, &r.lost_stacks);
        r.bytes += stream.Part(EncodeBatch(rows, batch.complete_below(), origin_ns));
        ++r.batches;
        break;
      }
      default:
        r.bytes += p.framed;
    }
  }
  return r;
}

// `cumem-analyze ARGS PATH`'s output, with the path (which reports name) replaced by "TRACE".
std::string Report(std::vector<std::string> args, const std::string& path) {
  args.push_back(path);
  const test::ToolResult r = test::Tool(args);
  EXPECT_EQ(r.code, kExitOk) << args[0] << " " << path << ": " << r.err;
  return absl::StrReplaceAll(r.out, {{path, "TRACE"}});
}

// Members that differ between the two files by construction: times and durations (every time member's name ends
// in _ns; events' are 10 us coarser in the rewritten file), the file's size, and the header's format version
// (checked on its own).
bool Excluded(const std::string& key) {
  return std::string_view(key).ends_with("_ns") || key == "file_bytes" || key == "format_version";
}

// Where `a` and `b` differ, as "path: a != b" lines, members Excluded() left out.
void Diff(const JsonValue& a, const JsonValue& b, const std::string& path, std::vector<std::string>* out) {
  if (a.type() != b.type()) {
    out->push_back(path + ": types differ");
    return;
  }
  switch (a.type()) {
    case JsonValue::Type::kObject:
      if (a.size() != b.size()) out->push_back(path + ": member counts differ");
      for (const auto& [key, value] : a.members()) {
        if (!Excluded(key)) Diff(value, b[key], path + "." + key, out);
      }
      return;
    case JsonValue::Type::kArray:
      if (a.size() != b.size()) {
        out->push_back(path + ": lengths differ");
        return;
      }
      for (size_t i = 0; i < a.size(); ++i) Diff(a[i], b[i], path + "[" + std::to_string(i) + "]", out);
      return;
    case JsonValue::Type::kBool:
      if (a.boolean() != b.boolean()) out->push_back(path + ": booleans differ");
      return;
    case JsonValue::Type::kNumber:
    case JsonValue::Type::kString:
      if (a.str() != b.str()) out->push_back(path + ": " + a.str() + " != " + b.str());
      return;
    case JsonValue::Type::kNull:
      return;
  }
}

class CoarseStreamedExample : public ::testing::TestWithParam<std::string> {};

TEST_P(CoarseStreamedExample, SameReportsAsFullResolution) {
  const std::string original = std::string(CUMEMTRACE_EXAMPLES_DIR) + "/" + GetParam() + ".pb";
  const std::string original_bytes = Slurp(original);
  const Rewritten rewritten = Rewrite(original_bytes);
  ASSERT_GT(rewritten.batches, 0u);
  EXPECT_EQ(rewritten.lost_stacks, 0u) << "rows whose stack a version-6 batch cannot hold";
  const std::string coarse = ::testing::TempDir() + "/coarse_" + GetParam() + ".pb";
  std::ofstream(coarse, std::ios::binary | std::ios::trunc) << rewritten.bytes;
  RecordProperty("original_bytes", std::to_string(original_bytes.size()));
  RecordProperty("rewritten_bytes", std::to_string(rewritten.bytes.size()));
  EXPECT_LT(rewritten.bytes.size(), original_bytes.size());
  // Its times are on the grid already and the compression is deterministic; this also reads events_stream packets.
  EXPECT_TRUE(Rewrite(rewritten.bytes).bytes == rewritten.bytes) << "rewriting the rewritten trace changed it";

  // The coarse trace's reports say their resolution in their first line; the original's only if it had one.
  const bool original_coarse = rewritten.original_time_unit_ns == kTimeUnitNs;
  for (const char* command : {"peak", "leaks", "oom"}) {
    std::string text = Report({command}, coarse);
    const size_t note = text.find(", times to 10 us\n");
    EXPECT_NE(note, std::string::npos) << command << ": the report does not say its times' resolution";
    if (note != std::string::npos && !original_coarse) text.erase(note, std::string(", times to 10 us").size());
    EXPECT_EQ(text, Report({command}, original)) << command;
  }
  const auto summary = [](const std::string& path) {
    std::string error;
    std::optional<JsonValue> v = JsonValue::Parse(Report({"summary", "--json"}, path), &error);
    EXPECT_TRUE(v.has_value()) << path << ": " << error;
    return v.value_or(JsonValue());
  };
  const JsonValue full = summary(original), streamed = summary(coarse);
  EXPECT_EQ(full["process"]["format_version"].uinteger(), rewritten.original_version);
  EXPECT_EQ(streamed["process"]["format_version"].uinteger(), format::kFormatVersion);
  EXPECT_EQ(streamed["process"]["time_unit_ns"].uinteger(), kTimeUnitNs);
  std::vector<std::string> diffs;
  Diff(full, streamed, "summary", &diffs);
  EXPECT_TRUE(diffs.empty()) << absl::StrJoin(diffs, "\n");
  std::filesystem::remove(coarse);
}

INSTANTIATE_TEST_SUITE_P(Examples, CoarseStreamedExample, ::testing::ValuesIn(ExampleTraces()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace cumemtrace::analyzer
