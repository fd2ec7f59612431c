// The trace reader: frames, protobuf parsing and conversion to the plain structs of trace_reader.h. This is the
// only analyzer file that sees the generated protobuf classes; it must never grow analysis
// logic. Column rules live in event_batch_decoder.cc, the fast path for event batches in event_batch_wire.cc (this
// file falls back to the generated class whenever that path does not take a batch), ordering in reorder_window.cc.
#include "analyzer/reader/trace_reader.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/reader/batch_decoders.h"
#include "analyzer/reader/buffered_file.h"
#include "analyzer/reader/delivery.h"
#include "analyzer/reader/event_batch_decoder.h"
#include "analyzer/reader/event_batch_wire.h"
#include "analyzer/reader/reorder_window.h"
#include "analyzer/usable_cpus.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/crc32c.h"
#include "proto/trace.pb.h"

namespace cumemtrace::analyzer {
namespace {

namespace pb = ::cumemtrace::format;

constexpr uint8_t kPacketTag = 0x0A;  // Trace.packet: field 1, wire type 2
constexpr uint8_t kEventsTag = (format::field::packet::kEvents << 3) | 2;
constexpr size_t kMaxPacketBytes = size_t{1} << 31;  // protobuf parses at most 2 GiB at once
constexpr size_t kMaxVarintBytes = 10;

enum class VarintResult { kOk, kCutOff, kOverflow };

// Reads a varint from [p, end). Sets `*length` to the number of bytes it took.
VarintResult ReadVarint(const uint8_t* p, const uint8_t* end, uint64_t* value, size_t* length) {
  uint64_t result = 0;
  for (size_t i = 0; i < kMaxVarintBytes; ++i) {
    if (p + i >= end) return VarintResult::kCutOff;
    const uint8_t byte = p[i];
    if (i == kMaxVarintBytes - 1 && byte > 1) return VarintResult::kOverflow;
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      *value = result;
      *length = i + 1;
      return VarintResult::kOk;
    }
  }
  return VarintResult::kOverflow;
}

void Convert(const pb::Header& h, TraceHeader* out) {
  out->format_version = h.format_version();
  out->tool_version = h.tool_version();
  out->pid = h.pid();
  out->ppid = h.ppid();
  out->argv.assign(h.argv().begin(), h.argv().end());
  out->hostname = h.hostname();
  out->executable = h.executable();
  out->start_time_ns = h.start_time_ns();
  out->start_unix_time_ns = h.start_unix_time_ns();
  out->driver_version = h.driver_version();
  out->stack_depth = h.stack_depth();
  out->torch_stack_depth = h.torch_stack_depth() != 0 ? h.torch_stack_depth() : h.stack_depth();
  out->rank = h.has_rank() ? h.rank() : -1;
  out->local_rank = h.has_local_rank() ? h.local_rank() : -1;
  out->world_size = h.has_world_size() ? h.world_size() : -1;
  out->forked_child = h.forked_child();
  out->python_frames_enabled = h.python_frames_enabled();
  out->cupti_enabled = h.cupti_enabled();
}

TrailerInfo Convert(const pb::Trailer& t) {
  TrailerInfo out;
  out.events = t.events();
  out.dropped_events = t.dropped_events();
  out.unwind_failures = t.unwind_failures();
  out.truncated_stacks = t.truncated_stacks();
  out.bytes_written = t.bytes_written();
  out.stack_nodes = t.stack_nodes();
  out.wrapper_slots_exhausted = t.wrapper_slots_exhausted();
  out.end_time_ns = t.end_time_ns();
  out.recorder_time_ns = t.recorder_time_ns();
  out.flushes = t.flushes();
  out.python_stacks = t.python_stacks();
  out.python_failures = t.python_failures();
  out.memory_samples = t.memory_samples();
  out.cupti_only_events = t.cupti_only_events();
  out.allocator_events = t.allocator_events();
  out.allocator_ignored = t.allocator_ignored();
  out.dropped_frames = t.dropped_frames();
  out.recorder_python_ns = t.recorder_python_ns();
  out.recorder_unwind_ns = t.recorder_unwind_ns();
  out.recorder_lock_wait_ns = t.recorder_lock_wait_ns();
  out.recorder_stack_ns = t.recorder_stack_ns();
  out.recorder_prologue_ns = t.recorder_prologue_ns();
  out.recorder_append_ns = t.recorder_append_ns();
  out.writer_time_ns = t.writer_time_ns();
  out.stalled_seals = t.stalled_seals();
  out.clock_calibrations = t.clock_calibrations();
  out.clock_max_error_ns = t.clock_max_error_ns();
  out.clock_steps = t.clock_steps();
  return out;
}

template <typename T>
absl::Span<const T> AsSpan(const google::protobuf::RepeatedField<T>& field) {
  return absl::Span<const T>(field.data(), static_cast<size_t>(field.size()));
}

class Reader {
 public:
  Reader(const std::string& path, TraceVisitor& visitor, ReadStats* stats)
      : path_(path), visitor_(visitor), stats_(*stats) {}
  // Batches that go straight to the visitor are decoded by `decoders` and reach it through `delivery` (the visitor).
  Reader(const std::string& path, Delivery& delivery, BatchDecoders& decoders, ReadStats* stats)
      : path_(path), visitor_(delivery), stats_(*stats), delivery_(&delivery), decoders_(&decoders) {}

  absl::Status Run();

 private:
  absl::Status ReadHeaderPacket();
  // Delivers the header (or the copy of it that stands in for a damaged one).
  absl::Status UseHeader(const pb::Header& header);
  // The first packet is not a readable header: finds the first copy of it (Packet.header_copy), delivers that and
  // leaves the file where the main loop goes on past the damage; returns `unreadable` when the file has no copy.
  absl::Status RecoverHeader(absl::Status unreadable, absl::string_view why);
  // From f's position, looks for a whole, parsing copy of the header; leaves `f` at its start when it finds one.
  absl::StatusOr<bool> FindHeaderCopy(BufferedFile& f, pb::Header* copy, uint64_t* at);
  absl::Status HandlePacket(const uint8_t* data, size_t size, uint64_t offset);
  absl::Status HandleEvents(const pb::EventBatch& batch, uint64_t offset);
  // decoders_ only: parses the EventBatch in job->inflated with the job's wire parser (false: it does not take it).
  static bool ParseInJob(DecodeJob* job) {
    return job->wire.Parse(reinterpret_cast<const uint8_t*>(job->inflated.data()), job->inflated.size());
  }
  // With `job` (decoders_ only; its decoder is used): the job is handed over or released before this returns.
  absl::Status HandleColumns(const BatchColumns& columns, uint64_t offset, DecodeJob* job = nullptr);
  // An EventBatch compressed as one zstd frame (format 5): inflated into inflated_, then read as one.
  absl::Status HandleCompressedEvents(const std::string& frame, uint64_t offset);
  // An EventBatch as the next part of a zstd frame that runs across packets (format 6): inflated with stream_ into
  // inflated_, then read as one. Parts after a missing one are skipped up to the next frame.
  absl::Status HandleStreamedEvents(const pb::StreamedEvents& part, uint64_t offset);
  // Parses an inflated EventBatch in inflated_.
  absl::Status HandleInflated(uint64_t offset, absl::string_view what);
  absl::Status HandleSymbols(const pb::Symbols& symbols, uint64_t offset);
  absl::Status HandlePythonFrames(const pb::PythonFrames& frames, uint64_t offset);
  absl::Status HandleStackNodes(const pb::StackNodes& nodes, uint64_t offset);
  // Parses a Packet into packet_; a packet that fails only because a string is not UTF-8 is repaired and parsed.
  bool ParsePacket(const uint8_t* data, size_t size);
  absl::Status Corrupt(uint64_t offset, absl::string_view what) const {
    return absl::DataLossError(absl::StrCat(path_, ": corrupt packet at byte ", offset, ": ", what));
  }
  absl::Status NotATrace() const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": not a cumemtrace trace (no header)"));
  }

  // Counts a damaged packet and keeps the first reason for the report.
  void NoteDamage(uint64_t offset, const absl::Status& status) {
    stream_next_part_ = -1;  // the damaged bytes may have held a part of the current frame
    if (stats_.damaged_packets++ == 0) {
      stats_.first_damage_at = offset;
      stats_.first_damage = std::string(status.message());
    }
  }
  // From the current position, skips bytes until a packet that verifies: a packet tag, a length inside the file, a
  // body that parses as a Packet of a known kind, followed by the end of the file or another packet tag. Returns
  // false at the end of the file. The skipped bytes are counted.
  absl::StatusOr<bool> Resync();

  // Frames the next packet: kPacket with its bytes, kEnd at a clean end of file, kCutOff at a packet the file ends
  // inside (stats_ then says where).
  enum class Frame { kPacket, kEnd, kCutOff };
  absl::StatusOr<Frame> NextFrame(const uint8_t** data, size_t* size, uint64_t* offset);
  absl::Status CheckZeroTail(bool* all_zero);

  const std::string& path_;
  TraceVisitor& visitor_;
  ReadStats& stats_;
  std::unique_ptr<BufferedFile> file_;
  pb::Packet packet_;
  pb::EventBatch batch_;
  EventBatchWire wire_;
  std::string inflated_;  // reused from batch to batch
  // The zstd frame the events_stream packets are parts of, and the part expected next (-1: none, after damage or
  // before the first frame).
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> stream_{nullptr, ZSTD_freeDCtx};
  int64_t stream_next_part_ = -1;
  // Rows are decoded kDecodePiece at a time (26 KB of Events), so that each piece is still in the cache when the
  // window or the visitor copies it.
  static constexpr size_t kDecodePiece = 256;
  EventBatchDecoder decoder_;
  std::vector<Event> decoded_;
  uint32_t format_version_ = 1;  // the header's
  std::vector<FailureColumn> failures_;
  ReorderWindow window_;
  uint64_t size_at_open_ = 0;
  uint64_t next_progress_at_ = kReadProgressBytes;  // the file offset of the next OnReadProgress
  // Both or neither: batches' rows decoded on other threads (batch_decoders.h).
  Delivery* delivery_ = nullptr;
  BatchDecoders* decoders_ = nullptr;
};

bool Reader::ParsePacket(const uint8_t* data, size_t size) {
  return packet_.ParseFromArray(data, static_cast<int>(size));
}

absl::Status Reader::Run() {
  // A corrupt packet is reported in the returned Status; the parser's own log lines would only repeat it.
  google::protobuf::LogSilencer silence_protobuf;
  absl::StatusOr<std::unique_ptr<BufferedFile>> file = BufferedFile::Open(path_);
  if (!file.ok()) return file.status();
  file_ = *std::move(file);
  size_at_open_ = file_->CurrentSize();
  stats_.bytes = size_at_open_ == UINT64_MAX ? 0 : size_at_open_;

  if (absl::Status s = ReadHeaderPacket(); !s.ok()) return s;
  while (true) {
    const uint8_t* data = nullptr;
    size_t size = 0;
    uint64_t offset = 0;
    absl::StatusOr<Frame> frame = NextFrame(&data, &size, &offset);
    if (!frame.ok()) {
      // Damaged framing: that packet is lost, not the file.
      if (!absl::IsDataLoss(frame.status())) return frame.status();
      NoteDamage(offset, frame.status());
      absl::StatusOr<bool> found = Resync();
      if (!found.ok()) return found.status();
      if (!*found) break;
      continue;
    }
    if (*frame != Frame::kPacket) break;
    ++stats_.packets;
    if (absl::Status s = HandlePacket(data, size, offset); !s.ok()) {
      if (!absl::IsDataLoss(s)) return s;
      --stats_.packets;
      NoteDamage(offset, s);
      // The frame's length may be the damaged part: skip only the frame's header, and look for the next packet
      // that verifies from there (the next one, when the length was right).
      absl::StatusOr<bool> found = Resync();
      if (!found.ok()) return found.status();
      if (!*found) break;
      continue;
    }
    file_->Consume(size);
    if (file_->offset() >= next_progress_at_) {
      visitor_.OnReadProgress(file_->offset(), stats_.bytes);
      next_progress_at_ = file_->offset() + kReadProgressBytes;
    }
  }
  window_.Drain(visitor_);
  stats_.events = window_.emitted();
  stats_.late_events = window_.late_events();
  stats_.max_lateness = window_.max_lateness();
  stats_.order_marked = window_.marked();
  stats_.bytes = std::max<uint64_t>(stats_.bytes, file_->offset() + file_->available());
  if (stats_.truncated) stats_.bytes = std::max<uint64_t>(stats_.bytes, stats_.truncated_at);
  return absl::OkStatus();
}

absl::StatusOr<Reader::Frame> Reader::NextFrame(const uint8_t** data, size_t* size, uint64_t* offset) {
  absl::StatusOr<size_t> got = file_->Ensure(1 + kMaxVarintBytes);
  if (!got.ok()) return got.status();
  *offset = file_->offset();
  if (*got == 0) return Frame::kEnd;
  const uint8_t* p = file_->data();
  if (p[0] != kPacketTag) {
    // A zero-filled tail (a file system that extended the file before the data reached it) is a cut-off end.
    bool all_zero = false;
    if (p[0] == 0) {
      if (absl::Status s = CheckZeroTail(&all_zero); !s.ok()) return s;
    }
    if (all_zero) {
      stats_.truncated = true;
      stats_.truncated_at = *offset;
      return Frame::kCutOff;
    }
    return Corrupt(*offset, absl::StrFormat("expected a packet tag (0x0a), found 0x%02x", p[0]));
  }
  uint64_t length = 0;
  size_t varint_bytes = 0;
  switch (ReadVarint(p + 1, p + *got, &length, &varint_bytes)) {
    case VarintResult::kOk:
      break;
    case VarintResult::kCutOff:
      stats_.truncated = true;
      stats_.truncated_at = *offset;
      return Frame::kCutOff;
    case VarintResult::kOverflow:
      return Corrupt(*offset, "the packet length is not a valid varint");
  }
  const uint64_t header_bytes = 1 + varint_bytes;
  // A length past the end of the file is a cut-off packet; check against the file size before buffering so that
  // a damaged length never makes the reader allocate more than the file holds. (A pipe has no size: there only
  // the 2 GiB bound protects, and reading finds the end.)
  uint64_t file_size = std::max(size_at_open_, *offset + *got);
  if (length > file_size - std::min(file_size, *offset + header_bytes)) {
    file_size = std::max(file_size, file_->CurrentSize());
  }
  if (length > file_size - std::min(file_size, *offset + header_bytes)) {
    stats_.truncated = true;
    stats_.truncated_at = *offset;
    return Frame::kCutOff;
  }
  if (length >= kMaxPacketBytes) {
    return Corrupt(*offset, absl::StrCat("packet of ", length, " bytes is larger than 2 GiB"));
  }
  file_->Consume(header_bytes);
  got = file_->Ensure(length);
  if (!got.ok()) return got.status();
  if (*got < length) {  // the file shrank or stopped growing after all
    stats_.truncated = true;
    stats_.truncated_at = *offset;
    return Frame::kCutOff;
  }
  *data = file_->data();
  *size = length;
  return Frame::kPacket;
}

absl::StatusOr<bool> Reader::Resync() {
  // Packets the preload writes are at most a few MiB; a candidate claiming more is not taken.
  constexpr uint64_t kMaxResyncPacketBytes = uint64_t{256} << 20;
  const uint64_t file_size = file_->CurrentSize();
  while (true) {
    absl::StatusOr<size_t> got = file_->Ensure(1 + kMaxVarintBytes);
    if (!got.ok()) return got.status();
    if (*got == 0) return false;
    const uint8_t* p = file_->data();
    uint64_t length = 0;
    size_t varint_bytes = 0;
    if (p[0] == kPacketTag && ReadVarint(p + 1, p + *got, &length, &varint_bytes) == VarintResult::kOk &&
        length > 0 && length <= kMaxResyncPacketBytes &&
        (file_size == UINT64_MAX || file_->offset() + 1 + varint_bytes + length <= file_size)) {
      const size_t whole = 1 + varint_bytes + static_cast<size_t>(length);
      got = file_->Ensure(whole + 1);
      if (!got.ok()) return got.status();
      p = file_->data();
      if (*got >= whole && (*got == whole || p[whole] == kPacketTag) &&
          ParsePacket(p + 1 + varint_bytes, static_cast<size_t>(length)) &&
          packet_.data_case() != pb::Packet::DATA_NOT_SET && packet_.data_case() != pb::Packet::kHeader) {
        return true;
      }
    }
    file_->Consume(1);
    ++stats_.skipped_bytes;
  }
}

absl::StatusOr<bool> Reader::FindHeaderCopy(BufferedFile& f, pb::Header* copy, uint64_t* at) {
  // A copy is written magic first and is at most 127 bytes: Trace.packet tag, length L, Packet.header_copy tag,
  // length L - 2, then the magic as a fixed64 field (tag 0x09 and its 8 bytes).
  constexpr uint8_t kCopyTag = (format::field::packet::kHeaderCopy << 3) | 2;
  constexpr uint64_t kMaxScan = uint64_t{256} << 20;  // copies are at most about a MiB apart
  uint8_t pattern[9] = {0x09};
  std::memcpy(pattern + 1, &format::kMagic, 8);
  const uint64_t start = f.offset();
  while (f.offset() - start < kMaxScan) {
    absl::StatusOr<size_t> got = f.Ensure(BufferedFile::kChunkSize);
    if (!got.ok()) return got.status();
    const bool at_end = *got < BufferedFile::kChunkSize;
    const uint8_t* p = f.data();
    const size_t n = *got;
    const uint8_t* hit = p;
    while ((hit = std::search(hit, p + n, pattern, pattern + sizeof(pattern))) != p + n) {
      const size_t h = static_cast<size_t>(hit - p);
      ++hit;
      if (h < 4 || p[h - 4] != kPacketTag || p[h - 2] != kCopyTag || p[h - 3] >= 0x80 || p[h - 1] >= 0x80 ||
          p[h - 3] != p[h - 1] + 2) {
        continue;
      }
      const size_t begin = h - 4;
      const size_t whole = 2 + p[h - 3];
      if (begin + whole > n) {
        if (at_end) break;
        // Not all of it is in the window: go on from its start.
        f.Consume(begin);
        hit = nullptr;
        break;
      }
      if (begin + whole < n && p[begin + whole] != kPacketTag) continue;
      if (!ParsePacket(p + begin + 2, whole - 2) || !packet_.has_header_copy() ||
          packet_.header_copy().magic() != format::kMagic || packet_.header_copy().format_version() == 0) {
        continue;
      }
      *copy = packet_.header_copy();
      *at = f.offset() + begin;
      f.Consume(begin);
      return true;
    }
    if (hit == nullptr) continue;
    if (at_end) return false;
    // Keep the window's last bytes: a copy may straddle the boundary.
    f.Consume(n - 128);
  }
  return false;
}

absl::Status Reader::CheckZeroTail(bool* all_zero) {
  *all_zero = true;
  while (true) {
    absl::StatusOr<size_t> got = file_->Ensure(BufferedFile::kChunkSize);
    if (!got.ok()) return got.status();
    if (*got == 0) return absl::OkStatus();
    const uint8_t* p = file_->data();
    for (size_t i = 0; i < *got; ++i) {
      if (p[i] != 0) {
        *all_zero = false;
        return absl::OkStatus();
      }
    }
    file_->Consume(*got);
  }
}

absl::Status Reader::ReadHeaderPacket() {
  absl::StatusOr<size_t> got = file_->Ensure(64);
  if (!got.ok()) return got.status();
  if (*got == 0) return absl::InvalidArgumentError(absl::StrCat(path_, ": empty file, not a trace"));
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t offset = 0;
  absl::StatusOr<Frame> frame = NextFrame(&data, &size, &offset);
  if (!frame.ok() || *frame != Frame::kPacket) {
    // Whatever is wrong with the first packet, the file does not start like a trace. Say "cut off" only when the
    // magic is visible in what there is.
    stats_.truncated = false;
    stats_.truncated_at = 0;
    uint8_t magic[8];
    std::memcpy(magic, &format::kMagic, sizeof(magic));
    const uint8_t* p = file_->data();
    const size_t n = std::min<size_t>(file_->available(), 64);
    if (frame.ok() && std::search(p, p + n, magic, magic + 8) != p + n) {
      return RecoverHeader(
          absl::InvalidArgumentError(
              absl::StrCat(path_, ": cut off inside its header: the traced process wrote no whole packet")),
          "its length runs past the end of the file");
    }
    return RecoverHeader(NotATrace(), frame.ok() ? "it is cut off" : frame.status().message());
  }
  if (!ParsePacket(data, size)) return RecoverHeader(NotATrace(), "it does not parse");
  if (!packet_.has_header()) return RecoverHeader(NotATrace(), "it is not a header");
  if (packet_.header().magic() != format::kMagic) return RecoverHeader(NotATrace(), "its magic number is wrong");
  if (absl::Status s = UseHeader(packet_.header()); !s.ok()) return s;
  file_->Consume(size);
  return absl::OkStatus();
}

absl::Status Reader::UseHeader(const pb::Header& h) {
  if (h.format_version() > format::kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, ": trace format version ", h.format_version(), " is newer than this cumem-analyze reads (up to ",
        format::kFormatVersion, "); upgrade cumem-analyze"));
  }
  TraceHeader header;
  Convert(h, &header);
  format_version_ = h.format_version();
  ++stats_.packets;
  visitor_.OnHeader(header);
  return absl::OkStatus();
}

absl::Status Reader::RecoverHeader(absl::Status unreadable, absl::string_view why) {
  // Only a file with a copy of the header is a trace whose header was damaged; without one (traces of older
  // preloads, files that are not traces) the first packet's failure stands.
  pb::Header copy;
  uint64_t copy_at = 0;
  if (size_at_open_ != UINT64_MAX) {
    // A regular file: look for the copy with a reader of its own, then read every packet from the start.
    absl::StatusOr<std::unique_ptr<BufferedFile>> scan = BufferedFile::Open(path_);
    if (!scan.ok()) return scan.status();
    absl::StatusOr<bool> found = FindHeaderCopy(**scan, &copy, &copy_at);
    if (!found.ok()) return found.status();
    if (!*found) return unreadable;
    absl::StatusOr<std::unique_ptr<BufferedFile>> again = BufferedFile::Open(path_);
    if (!again.ok()) return again.status();
    file_ = *std::move(again);
  } else {
    // A pipe cannot go back: the packets between the header and the copy are lost too (counted as skipped).
    const uint64_t from = file_->offset();
    absl::StatusOr<bool> found = FindHeaderCopy(*file_, &copy, &copy_at);
    if (!found.ok()) return found.status();
    if (!*found) return unreadable;
    stats_.skipped_bytes += copy_at - from;
  }
  stats_.truncated = false;
  stats_.truncated_at = 0;
  stats_.header_recovered = true;
  stats_.header_copy_at = copy_at;
  NoteDamage(0, absl::DataLossError(absl::StrCat(
                    path_, ": the header is damaged (", why, "); read with its copy at byte ", copy_at,
                    ": the command line, host name and executable are unknown")));
  if (absl::Status s = UseHeader(copy); !s.ok()) return s;
  --stats_.packets;  // the copy is counted where the main loop reads it
  // From here the main loop goes on: past the damaged header to the next packet that verifies.
  absl::StatusOr<bool> resynced = Resync();
  if (!resynced.ok()) return resynced.status();
  return absl::OkStatus();
}

absl::Status Reader::HandlePacket(const uint8_t* data, size_t size, uint64_t offset) {
  // Fast path: a packet that is exactly one EventBatch field parses straight into a reused EventBatch, whose
  // repeated fields keep their capacity from batch to batch.
  if (size >= 2 && data[0] == kEventsTag) {
    uint64_t length = 0;
    size_t varint_bytes = 0;
    if (ReadVarint(data + 1, data + size, &length, &varint_bytes) == VarintResult::kOk &&
        1 + varint_bytes + length == size) {
      const uint8_t* body = data + 1 + varint_bytes;
      if (decoders_ != nullptr) {
        DecodeJob* job = decoders_->Acquire();
        job->inflated.assign(reinterpret_cast<const char*>(body), length);  // the file's buffer moves on
        if (ParseInJob(job)) return HandleColumns(job->wire.columns(), offset, job);
        decoders_->Release(job);  // the wire parser does not take it: the generated class below reads it
      } else if (wire_.Parse(body, length)) {
        return HandleColumns(wire_.columns(), offset);
      }
      if (!batch_.ParseFromArray(body, static_cast<int>(length))) {
        return Corrupt(offset, "the event batch does not parse");
      }
      return HandleEvents(batch_, offset);
    }
  }
  if (!ParsePacket(data, size)) return Corrupt(offset, "the packet does not parse");
  switch (packet_.data_case()) {
    case pb::Packet::kHeader:
    case pb::Packet::kHeaderCopy:
      break;  // only the first header counts; a copy stands in for it only when it is damaged (RecoverHeader)
    case pb::Packet::kThread: {
      ThreadInfo t;
      t.index = packet_.thread().index();
      t.tid = packet_.thread().tid();
      t.name = packet_.thread().name();
      visitor_.OnThread(t);
      break;
    }
    case pb::Packet::kModule: {
      const pb::Module& m = packet_.module();
      ModuleInfo info;
      info.id = m.id();
      info.path = m.path();
      info.load_bias = m.load_bias();
      info.start = m.start();
      info.end = m.end();
      info.build_id = m.build_id();
      visitor_.OnModule(info);
      break;
    }
    case pb::Packet::kStackNodes:
      return HandleStackNodes(packet_.stack_nodes(), offset);
    case pb::Packet::kEvents:
      return HandleEvents(packet_.events(), offset);
    case pb::Packet::kEventsZstd:
      return HandleCompressedEvents(packet_.events_zstd(), offset);
    case pb::Packet::kEventsStream:
      return HandleStreamedEvents(packet_.events_stream(), offset);
    case pb::Packet::kStrings: {
      const pb::Strings& s = packet_.strings();
      for (int i = 0; i < s.value_size(); ++i) visitor_.OnString(s.first_id() + static_cast<uint32_t>(i), s.value(i));
      break;
    }
    case pb::Packet::kSymbols:
      return HandleSymbols(packet_.symbols(), offset);
    case pb::Packet::kPythonFrames:
      return HandlePythonFrames(packet_.python_frames(), offset);
    case pb::Packet::kMemorySample: {
      const pb::MemorySample& m = packet_.memory_sample();
      MemorySample sample;
      sample.time_ns = m.time_ns();
      sample.device = m.device();
      sample.free_bytes = m.free_bytes();
      sample.total_bytes = m.total_bytes();
      sample.after_seq = m.after_seq();
      visitor_.OnMemorySample(sample);
      break;
    }
    case pb::Packet::kNotice: {
      NoticeInfo notice;
      notice.code = static_cast<format::NoticeCode>(packet_.notice().code());
      notice.message = packet_.notice().message();
      notice.time_ns = packet_.notice().time_ns();
      visitor_.OnNotice(notice);
      break;
    }
    case pb::Packet::kAllocatorAttach: {
      const pb::AllocatorAttach& a = packet_.allocator_attach();
      AllocatorAttachInfo info;
      info.after_seq = a.after_seq();
      info.time_ns = a.time_ns();
      info.library = a.library();
      info.devices = a.devices();
      info.config = a.config();
      info.at_first_segment = a.at_first_segment();
      visitor_.OnAllocatorAttach(info);
      break;
    }
    case pb::Packet::kGpuProcesses: {
      const pb::GpuProcesses& g = packet_.gpu_processes();
      GpuProcessesInfo info;
      info.time_ns = g.time_ns();
      info.after_seq = g.after_seq();
      info.device = g.device();
      info.reason = g.reason() <= 2 ? static_cast<GpuProcessesInfo::Reason>(g.reason())
                                    : GpuProcessesInfo::Reason::kUnknown;
      info.pids = g.pids() <= 2 ? static_cast<GpuProcessesInfo::Pids>(g.pids()) : GpuProcessesInfo::Pids::kUnknown;
      for (const pb::GpuProcess& p : g.process()) {
        info.processes.push_back({p.pid(), p.used_bytes(), p.used_unknown(), p.self(), p.command()});
      }
      info.error = g.error();
      visitor_.OnGpuProcesses(info);
      break;
    }
    case pb::Packet::kPhase: {
      const pb::Phase& ph = packet_.phase();
      PhaseInfo info;
      info.after_seq = ph.after_seq();
      info.time_ns = ph.time_ns();
      info.thread = ph.thread();
      info.kind = static_cast<format::PhaseKind>(ph.kind());
      info.name = ph.name();
      info.range_id = ph.range_id();
      info.domain = ph.domain();
      visitor_.OnPhase(info);
      break;
    }
    case pb::Packet::kTrailer:
      stats_.has_trailer = true;
      visitor_.OnTrailer(Convert(packet_.trailer()));
      break;
    case pb::Packet::kDevice: {
      const pb::Device& d = packet_.device();
      DeviceInfo info;
      info.ordinal = d.ordinal();
      info.name = d.name();
      info.uuid = d.uuid();
      info.total_memory = d.total_memory();
      info.driver_version = d.driver_version();
      visitor_.OnDevice(info);
      break;
    }
    case pb::Packet::DATA_NOT_SET:
      break;  // an empty packet, or a kind this version does not know: readers may ignore additions
  }
  return absl::OkStatus();
}

absl::Status Reader::HandleStackNodes(const pb::StackNodes& nodes, uint64_t offset) {
  if (nodes.parent_size() != nodes.pc_size()) {
    return Corrupt(offset, absl::StrCat("stack nodes: column parent has ", nodes.parent_size(),
                                        " entries, column pc has ", nodes.pc_size()));
  }
  StackNode node;
  for (int i = 0; i < nodes.pc_size(); ++i) {
    node.id = nodes.first_id() + static_cast<uint64_t>(i);
    node.parent = nodes.parent(i);
    node.pc = nodes.pc(i);
    visitor_.OnStackNode(node);
  }
  return absl::OkStatus();
}

absl::Status Reader::HandleSymbols(const pb::Symbols& s, uint64_t offset) {
  const int n = s.pc_size();
  auto check = [&](const char* column, int have, bool optional) -> absl::Status {
    if (have == n || (optional && have == 0)) return absl::OkStatus();
    return Corrupt(offset, absl::StrCat("symbols: column ", column, " has ", have, " entries for ", n, " pcs"));
  };
  if (absl::Status st = check("function", s.function_size(), false); !st.ok()) return st;
  if (absl::Status st = check("module", s.module_size(), false); !st.ok()) return st;
  if (absl::Status st = check("offset", s.offset_size(), true); !st.ok()) return st;
  if (absl::Status st = check("file", s.file_size(), true); !st.ok()) return st;
  if (absl::Status st = check("line", s.line_size(), true); !st.ok()) return st;
  SymbolInfo info;
  for (int i = 0; i < n; ++i) {
    info.pc = s.pc(i);
    info.function = s.function(i);
    info.module = s.module(i);
    info.offset = s.offset_size() == 0 ? 0 : s.offset(i);
    info.file = s.file_size() == 0 ? 0 : s.file(i);
    info.line = s.line_size() == 0 ? 0 : s.line(i);
    visitor_.OnSymbol(info);
  }
  return absl::OkStatus();
}

absl::Status Reader::HandlePythonFrames(const pb::PythonFrames& f, uint64_t offset) {
  const int n = f.function_size();
  if (f.file_size() != n || f.line_size() != n) {
    return Corrupt(offset, absl::StrCat("python frames: columns have ", n, " functions, ", f.file_size(),
                                        " files and ", f.line_size(), " lines"));
  }
  if (n > 0 && f.first_id() == 0) return Corrupt(offset, "python frames: first_id is 0 (ids start at 1)");
  PythonFrameInfo info;
  for (int i = 0; i < n; ++i) {
    info.id = uint64_t{f.first_id()} + static_cast<uint64_t>(i);
    info.function = f.function(i);
    info.file = f.file(i);
    info.line = f.line(i);
    visitor_.OnPythonFrame(info);
  }
  return absl::OkStatus();
}

namespace {
// A batch holds at most a few MiB; a frame that says it holds more is damaged, and is not inflated.
constexpr size_t kMaxBatchBytes = size_t{256} << 20;
}  // namespace

absl::Status Reader::HandleCompressedEvents(const std::string& frame, uint64_t offset) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    return Corrupt(offset, "the compressed event batch is not a zstd frame that states its size");
  }
  if (size > kMaxBatchBytes) {
    return Corrupt(offset, absl::StrCat("the compressed event batch says it holds ", size, " bytes (at most ",
                                        kMaxBatchBytes, ")"));
  }
  inflated_.resize(static_cast<size_t>(size));
  const size_t got = ZSTD_decompress(inflated_.data(), inflated_.size(), frame.data(), frame.size());
  if (ZSTD_isError(got) != 0 || got != size) {
    return Corrupt(offset, absl::StrCat("the compressed event batch does not inflate (",
                                        ZSTD_isError(got) != 0 ? ZSTD_getErrorName(got) : "short", ")"));
  }
  return HandleInflated(offset, "the compressed event batch");
}

absl::Status Reader::HandleStreamedEvents(const pb::StreamedEvents& part, uint64_t offset) {
  if (part.part() == 0) {
    if (stream_ == nullptr) stream_.reset(ZSTD_createDCtx());
    if (stream_ == nullptr) return absl::ResourceExhaustedError("out of memory for a zstd stream");
    ZSTD_DCtx_reset(stream_.get(), ZSTD_reset_session_only);
    // A frame's window is what its parts may refer back to; the preload's is a few MiB (more is damage).
    ZSTD_DCtx_setParameter(stream_.get(), ZSTD_d_windowLogMax, 27);
    stream_next_part_ = 0;
  }
  if (static_cast<int64_t>(part.part()) != stream_next_part_) {
    // A part of a frame whose earlier part was lost: its bytes refer to what that part held.
    stream_next_part_ = -1;
    ++stats_.undecodable_batches;
    return absl::OkStatus();
  }
  ++stream_next_part_;
  inflated_.resize(std::max<size_t>(inflated_.capacity(), size_t{1} << 16));
  ZSTD_inBuffer in{part.zstd().data(), part.zstd().size(), 0};
  size_t produced = 0;
  // The preload flushed the frame after the batch: its bytes give out the whole batch, and nothing more.
  while (true) {
    ZSTD_outBuffer out{inflated_.data(), inflated_.size(), produced};
    const size_t r = ZSTD_decompressStream(stream_.get(), &out, &in);
    produced = out.pos;
    if (ZSTD_isError(r) != 0) {
      stream_next_part_ = -1;
      return Corrupt(offset, absl::StrCat("the streamed event batch does not inflate (", ZSTD_getErrorName(r), ")"));
    }
    if (in.pos == in.size && out.pos < out.size) break;
    if (inflated_.size() >= kMaxBatchBytes) {
      stream_next_part_ = -1;
      return Corrupt(offset, absl::StrCat("the streamed event batch inflates to more than ", kMaxBatchBytes,
                                          " bytes"));
    }
    inflated_.resize(inflated_.size() * 2);
  }
  inflated_.resize(produced);
  if (part.has_crc32c() && format::Crc32c(inflated_.data(), inflated_.size()) != part.crc32c()) {
    stream_next_part_ = -1;
    return Corrupt(offset, "the streamed event batch inflates to bytes whose CRC-32C is not the one written");
  }
  if (produced == 0) return absl::OkStatus();  // a part that only ends its frame
  return HandleInflated(offset, "the streamed event batch");
}

absl::Status Reader::HandleInflated(uint64_t offset, absl::string_view what) {
  if (decoders_ != nullptr) {
    // The bytes go with the job (the columns point into them); the reader inflates the next batch into the
    // buffer the job held before.
    DecodeJob* job = decoders_->Acquire();
    job->inflated.swap(inflated_);
    if (ParseInJob(job)) return HandleColumns(job->wire.columns(), offset, job);
    job->inflated.swap(inflated_);  // the wire parser does not take it: the generated class below reads it
    decoders_->Release(job);
  } else if (wire_.Parse(reinterpret_cast<const uint8_t*>(inflated_.data()), inflated_.size())) {
    return HandleColumns(wire_.columns(), offset);
  }
  if (!batch_.ParseFromArray(inflated_.data(), static_cast<int>(inflated_.size()))) {
    return Corrupt(offset, absl::StrCat(what, " does not parse"));
  }
  return HandleEvents(batch_, offset);
}

absl::Status Reader::HandleEvents(const pb::EventBatch& b, uint64_t offset) {
  failures_.clear();
  for (const pb::Failure& f : b.failures()) {
    failures_.push_back(FailureColumn{f.row(), f.result(), f.free_bytes(), f.total_bytes(), f.has_mem_info()});
  }
  BatchColumns c;
  c.first_seq = b.first_seq();
  c.base_time_ns = b.base_time_ns();
  c.seq_delta = AsSpan(b.seq_delta());
  c.time_delta_ns = AsSpan(b.time_delta_ns());
  c.api = AsSpan(b.api());
  c.address_delta = AsSpan(b.address_delta());
  c.size = AsSpan(b.size());
  c.stack = AsSpan(b.stack());
  c.thread = AsSpan(b.thread());
  c.device = AsSpan(b.device());
  c.stream = AsSpan(b.stream());
  c.aux = AsSpan(b.aux());
  c.failures = failures_;
  c.cupti_rows = AsSpan(b.cupti_rows());
  c.thread_runs = AsSpan(b.thread_runs());
  c.device_runs = AsSpan(b.device_runs());
  c.complete_below = b.complete_below();
  c.address_shift = b.address_shift();
  c.time_unit_ns = b.time_unit_ns();
  return HandleColumns(c, offset);
}

absl::Status Reader::HandleColumns(const BatchColumns& given, uint64_t offset, DecodeJob* job) {
  BatchColumns columns = given;
  columns.format_version = format_version_;
  EventBatchDecoder& decoder = job != nullptr ? job->decoder : decoder_;
  if (absl::Status s = decoder.Start(columns); !s.ok()) {
    if (job != nullptr) decoders_->Release(job);
    return Corrupt(offset, s.message());
  }
  if (columns.complete_below != 0) window_.ExpectMarks();
  stats_.time_unit_ns = std::max<uint64_t>(stats_.time_unit_ns, columns.time_unit_ns);
  stats_.unknown_api_events += decoder.unknown_rows();
  // A batch in order that the window would only pass on goes to the visitor piece by piece, each piece decoded
  // just before it is handed over (the usual case: the writer keeps its batches in order); or, with decoders,
  // decoded whole on one of their threads while this one goes on.
  const bool pass_through = decoder.unknown_rows() == 0 && decoder.in_order() &&
                            window_.BeginPassThrough(decoder.first_seq(), decoder.last_seq(),
                                                     columns.complete_below, visitor_);
  if (pass_through && job != nullptr) {
    window_.PassedOnElsewhere(decoder.rows(), decoder.last_seq());
    decoders_->Submit(job);
    delivery_->OnEventsDecodedApart(job, decoders_);
    if (columns.complete_below != 0) window_.ReleaseBelow(columns.complete_below, visitor_);
    return absl::OkStatus();
  }
  if (decoded_.size() < kDecodePiece) decoded_.resize(kDecodePiece);
  while (decoder.remaining() != 0) {
    const size_t rows = decoder.Next(decoded_.data(), kDecodePiece);
    if (pass_through) {
      window_.PassOn(absl::Span<const Event>(decoded_.data(), rows), visitor_);
      continue;
    }
    for (size_t i = 0; i < rows; ++i) {
      if (decoded_[i].info != nullptr) window_.Push(decoded_[i], visitor_);
    }
  }
  if (job != nullptr) decoders_->Release(job);
  if (columns.complete_below != 0) window_.ReleaseBelow(columns.complete_below, visitor_);
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadTrace(const std::string& path, TraceVisitor& visitor, ReadStats* stats, DeliveryThread thread) {
  ReadStats local;
  if (stats == nullptr) stats = &local;
  *stats = ReadStats();
  const unsigned cpus = thread == DeliveryThread::kAuto ? UsableCpus() : 0;
  // The reader, the second thread and PyTorch's allocator layer (layer_thread.h) take three CPUs; two decoders
  // keep the reader's thread below the others' on a host of slow cores. Below five CPUs they would take turns.
  const bool decoders = thread == DeliveryThread::kDecodersToo || cpus >= 5;
  const bool threaded = decoders || thread == DeliveryThread::kSecond || cpus > 1;
  if (!threaded) return Reader(path, visitor, stats).Run();
  std::optional<BatchDecoders> batch_decoders;  // outlives `delivery`, which releases its jobs
  if (decoders) batch_decoders.emplace(2);
  Delivery delivery(visitor);
  Reader reader = decoders ? Reader(path, delivery, *batch_decoders, stats) : Reader(path, delivery, stats);
  absl::Status status = reader.Run();
  delivery.Finish();
  return status;
}

}  // namespace cumemtrace::analyzer
