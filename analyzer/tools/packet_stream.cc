// Packet framing for the copying tools: tag 0x0a, varint length, bytes. Corruption is an error naming the offset;
// a packet cut off by the end of the file ends the stream quietly (the reader has already said so).
#include "analyzer/tools/packet_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cumemtrace::analyzer {
namespace {

constexpr uint8_t kPacketTag = 0x0A;
constexpr size_t kMaxVarintBytes = 10;

// Reads a varint from [p, end); 0 when it does not end there.
size_t ReadVarint(const uint8_t* p, const uint8_t* end, uint64_t* value) {
  uint64_t result = 0;
  for (size_t i = 0; i < kMaxVarintBytes && p + i < end; ++i) {
    result |= static_cast<uint64_t>(p[i] & 0x7f) << (7 * i);
    if ((p[i] & 0x80) == 0) {
      *value = result;
      return i + 1;
    }
  }
  return 0;
}

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PacketStream>> PacketStream::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<BufferedFile>> file = BufferedFile::Open(path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<PacketStream>(new PacketStream(path, *std::move(file)));
}

absl::StatusOr<bool> PacketStream::Next(uint32_t* field, absl::string_view* bytes) {
  file_->Consume(pending_);
  pending_ = 0;
  absl::StatusOr<size_t> got = file_->Ensure(1 + kMaxVarintBytes);
  if (!got.ok()) return got.status();
  if (*got == 0) return false;
  const uint8_t* p = file_->data();
  const uint64_t offset = file_->offset();
  if (p[0] != kPacketTag) {
    if (p[0] == 0) return false;  // a zero-filled tail: the reader took it as the end of a cut-off trace
    return absl::DataLossError(absl::StrCat(path_, ": no packet at byte ", offset));
  }
  uint64_t length = 0;
  const size_t header = 1 + ReadVarint(p + 1, p + *got, &length);
  if (header == 1) return false;
  got = file_->Ensure(header + length);
  if (!got.ok()) return got.status();
  if (*got < header + length) return false;
  p = file_->data();
  uint64_t tag = 0;
  if (length == 0 || ReadVarint(p + header, p + header + length, &tag) == 0) {
    return absl::DataLossError(absl::StrCat(path_, ": corrupt packet at byte ", offset));
  }
  *field = static_cast<uint32_t>(tag >> 3);
  *bytes = absl::string_view(reinterpret_cast<const char*>(p + header), length);
  pending_ = header + length;
  return true;
}

absl::StatusOr<std::unique_ptr<TraceFileWriter>> TraceFileWriter::Create(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return absl::AlreadyExistsError(absl::StrCat(path, " exists; not overwriting it"));
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  std::FILE* file = fdopen(fd, "wb");
  if (file == nullptr) {
    close(fd);
    unlink(path.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return std::unique_ptr<TraceFileWriter>(new TraceFileWriter(path, file));
}

TraceFileWriter::~TraceFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_) unlink(path_.c_str());
}

absl::Status TraceFileWriter::Write(absl::string_view packet) {
  std::string header(1, static_cast<char>(kPacketTag));
  AppendVarint(packet.size(), &header);
  if (std::fwrite(header.data(), 1, header.size(), file_) != header.size() ||
      std::fwrite(packet.data(), 1, packet.size(), file_) != packet.size()) {
    return absl::InternalError(absl::StrCat("cannot write ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status TraceFileWriter::Finish() {
  const bool ok = std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) return absl::InternalError(absl::StrCat("cannot write ", path_, ": ", std::strerror(errno)));
  finished_ = true;
  return absl::OkStatus();
}

absl::Status RefuseToReplace(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) return absl::AlreadyExistsError(absl::StrCat(path, " exists; not overwriting it"));
  return absl::OkStatus();
}

absl::Status CopyTrace(const std::string& input, const std::string& output, const PacketCopier& packet,
                       const std::function<absl::Status(TraceFileWriter& out)>& at_end) {
  absl::StatusOr<std::unique_ptr<PacketStream>> in = PacketStream::Open(input);
  if (!in.ok()) return in.status();
  absl::StatusOr<std::unique_ptr<TraceFileWriter>> writer = TraceFileWriter::Create(output);
  if (!writer.ok()) return writer.status();
  while (true) {
    uint32_t field = 0;
    absl::string_view bytes;
    absl::StatusOr<bool> more = (*in)->Next(&field, &bytes);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (absl::Status s = packet(field, bytes, **writer); !s.ok()) return s;
  }
  if (absl::Status s = at_end(**writer); !s.ok()) return s;
  return (*writer)->Finish();
}

}  // namespace cumemtrace::analyzer
