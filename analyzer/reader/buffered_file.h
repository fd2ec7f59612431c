// A forward-only buffered reader over a file, for traces that may be many gigabytes: it holds one window of the
// file (grown only to fit the largest packet asked for), never the whole file. It knows nothing about the trace
// format and must stay that way; it must never read ahead more than it is asked to hold plus one chunk. A regular
// file with less than a chunk left gets a window of what is left (plus kTailSlack) instead: a 200-byte trace costs a
// 4 KiB window, not a 4 MiB one (the fuzz target reads tens of millions of small traces).
#ifndef CUMEMTRACE_ANALYZER_READER_BUFFERED_FILE_H_
#define CUMEMTRACE_ANALYZER_READER_BUFFERED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cumemtrace::analyzer {

class BufferedFile {
 public:
  static constexpr size_t kChunkSize = size_t{4} << 20;
  // Room past the end of a regular file in a window sized to the file: the read that finds the end needs room, and
  // a file that grows a little after fstat fits without growing the window.
  static constexpr size_t kTailSlack = 4096;

  // Opens `path` for reading. Errors name the path and the system's reason.
  static absl::StatusOr<std::unique_ptr<BufferedFile>> Open(const std::string& path);

  BufferedFile(const BufferedFile&) = delete;
  BufferedFile& operator=(const BufferedFile&) = delete;
  ~BufferedFile();

  // Size of the file as fstat reports it now (a file still being written may grow); UINT64_MAX for what is not a
  // regular file (a pipe: `cumem-analyze <(zcat run.pb.gz)`), whose end shows only when reading reaches it.
  uint64_t CurrentSize();
  // File offset of data()[0].
  uint64_t offset() const { return offset_; }
  // The bytes buffered from offset() on.
  const uint8_t* data() const { return buffer_.get() + begin_; }
  size_t available() const { return end_ - begin_; }
  // Size of the window now (for tests): the largest Ensure() so far or a chunk, whichever is larger, but no more
  // than what a regular file had left then plus kTailSlack, unless the file grew past that.
  size_t capacity() const { return capacity_; }

  // Makes at least `n` bytes available from offset() on unless the file ends first; returns how many are available
  // then (fewer than `n` only at the end of the file).
  absl::StatusOr<size_t> Ensure(size_t n);
  // Drops the first `n` available bytes; n <= available().
  void Consume(size_t n) {
    begin_ += n;
    offset_ += n;
  }

 private:
  BufferedFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  // Makes the window at least `capacity` bytes with the available bytes at its front.
  void Reserve(size_t capacity);

  std::string path_;
  int fd_ = -1;
  std::unique_ptr<uint8_t[]> buffer_;
  size_t capacity_ = 0;
  size_t begin_ = 0;
  size_t end_ = 0;
  uint64_t offset_ = 0;
  bool eof_ = false;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_READER_BUFFERED_FILE_H_
