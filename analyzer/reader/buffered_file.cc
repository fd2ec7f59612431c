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

absl::StatusOr<size_t> BufferedFile::Ensure(size_t n) {
  if (available() >= n) return available();
  if (eof_) return available();
  // Move what is left to the front, grow if `n` does not fit, then read until `n` bytes are there or the file ends.
  const size_t wanted = std::max(n, kChunkSize);
  if (wanted > capacity_) {
    std::unique_ptr<uint8_t[]> grown(new uint8_t[wanted]);
    if (available() != 0) std::memcpy(grown.get(), data(), available());
    buffer_ = std::move(grown);
    capacity_ = wanted;
  } else if (begin_ != 0) {
    if (available() != 0) std::memmove(buffer_.get(), data(), available());
  }
  end_ -= begin_;
  begin_ = 0;
  while (end_ < n) {
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
