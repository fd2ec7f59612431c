// Buffered reads with read(2) into a window that grows only to fit the largest packet asked for. Must never read
// the whole file into memory.
#include "analyzer/reader/buffered_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cumemtrace::analyzer {

absl::StatusOr<std::unique_ptr<BufferedFile>> BufferedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string message = absl::StrCat(path, ": cannot open: ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::UnavailableError(message);
  }
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a trace file"));
  }
  return std::unique_ptr<BufferedFile>(new BufferedFile(path, fd));
}

BufferedFile::~BufferedFile() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t BufferedFile::CurrentSize() {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return 0;
  if (!S_ISREG(st.st_mode)) return UINT64_MAX;
  return st.st_size < 0 ? 0 : static_cast<uint64_t>(st.st_size);
}

void BufferedFile::Reserve(size_t capacity) {
  if (capacity > capacity_) {
    std::unique_ptr<uint8_t[]> grown(new uint8_t[capacity]);
    if (available() != 0) std::memcpy(grown.get(), data(), available());
    buffer_ = std::move(grown);
    capacity_ = capacity;
  } else if (begin_ != 0) {
    if (available() != 0) std::memmove(buffer_.get(), data(), available());
  }
  end_ -= begin_;
  begin_ = 0;
}

absl::StatusOr<size_t> BufferedFile::Ensure(size_t n) {
  if (available() >= n) return available();
  if (eof_) return available();
  // Move what is left to the front, grow if `n` does not fit, then read until `n` bytes are there or the file ends.
  // The window is a chunk, or `n` when that is larger; but a regular file with less than that left from offset()
  // needs no more than what is left (plus room for the read that finds the end), and a small trace must not cost a
  // 4 MiB allocation. The window then holds the rest of the file, as the full window would have: Ensure returns the
  // same counts for any file that does not grow while it is read.
  const size_t full = std::max(n, kChunkSize);
  size_t wanted = full;
  if (capacity_ < full) {
    const uint64_t size = CurrentSize();  // UINT64_MAX for a pipe: the full window
    const uint64_t left = size - std::min(size, offset_);
    if (left < full - std::min(full, kTailSlack)) {
      wanted = std::max(available(), static_cast<size_t>(left) + kTailSlack);
    }
  }
  Reserve(wanted);
  while (end_ < n) {
    // Full before `n` bytes: the file grew past the size fstat gave. Grow to the full window, as without the cap.
    if (end_ == capacity_) Reserve(full);
    const ssize_t got = ::read(fd_, buffer_.get() + end_, capacity_ - end_);
    if (got < 0) {
      if (errno == EINTR) continue;
      return absl::DataLossError(
          absl::StrCat(path_, ": read error at byte ", offset_ + end_, ": ", std::strerror(errno)));
    }
    if (got == 0) {
      eof_ = true;
      break;
    }
    end_ += static_cast<size_t>(got);
  }
  return available();
}

}  // namespace cumemtrace::analyzer
