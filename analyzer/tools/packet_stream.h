// Raw packets of a trace file, for the tools that write a changed copy of a trace (symbolize, redact): they read
// what they need through the reader first (which validates the file), then stream the packets here and copy most of
// them byte for byte. It never interprets a packet beyond its field number, and never holds more than one packet.
#ifndef CUMEMTRACE_ANALYZER_TOOLS_PACKET_STREAM_H_
#define CUMEMTRACE_ANALYZER_TOOLS_PACKET_STREAM_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analyzer/reader/buffered_file.h"

namespace cumemtrace::analyzer {

class PacketStream {
 public:
  static absl::StatusOr<std::unique_ptr<PacketStream>> Open(const std::string& path);

  // The next whole packet: its Packet field number (format::field::packet) and its bytes, valid until the next
  // call. False at the end of the file and at a packet the file ends inside (a cut-off trace keeps what precedes).
  absl::StatusOr<bool> Next(uint32_t* field, absl::string_view* bytes);

 private:
  PacketStream(std::string path, std::unique_ptr<BufferedFile> file) : path_(std::move(path)), file_(std::move(file)) {}

  std::string path_;
  std::unique_ptr<BufferedFile> file_;
  size_t pending_ = 0;  // bytes of the packet handed out last, consumed at the next call
};

// Writes a new trace file packet by packet. Refuses to replace a file that exists; a file left unfinished (an
// error, or Finish never called) is removed.
class TraceFileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<TraceFileWriter>> Create(const std::string& path);
  ~TraceFileWriter();

  // Frames `packet` (serialized Packet bytes) as field 1 of Trace.
  absl::Status Write(absl::string_view packet);
  absl::Status Finish();

 private:
  TraceFileWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

  std::string path_;
  std::FILE* file_;
  bool finished_ = false;
};

// A tool's refusal to replace `path` before it reads anything: AlreadyExists when something is there.
absl::Status RefuseToReplace(const std::string& path);

// The copy both tools make: every whole packet of `input`, in order, goes through `packet`, which writes what it
// keeps (as it is, changed, or later); then `at_end` writes what goes last. The new file is `output`.
using PacketCopier = std::function<absl::Status(uint32_t field, absl::string_view bytes, TraceFileWriter& out)>;
absl::Status CopyTrace(const std::string& input, const std::string& output, const PacketCopier& packet,
                       const std::function<absl::Status(TraceFileWriter& out)>& at_end);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_TOOLS_PACKET_STREAM_H_
