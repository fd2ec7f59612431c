#include "preload/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "preload/log.h"

namespace cumemtrace::preload {

bool Sink::Open(const char* path, bool overwrite) {
  int saved_errno = errno;
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (overwrite ? O_TRUNC : O_EXCL);
  fd_ = open(path, flags, 0644);
  if (fd_ < 0) {
    if (errno == EEXIST) {
      Warn("%s exists; not tracing this process (set CUMEMTRACE_OVERWRITE=1, or put %%p in CUMEMTRACE_OUTPUT)",
           path);
    } else {
      Warn("cannot create %s: %s; not tracing this process", path, strerror(errno));
    }
    errno = saved_errno;
    return false;
  }
  strncpy(path_, path, sizeof(path_) - 1);
  errno = saved_errno;
  return true;
}

bool Sink::Write(const uint8_t* data, size_t size) {
  if (fd_ < 0) return false;
  int saved_errno = errno;
  while (size > 0) {
    ssize_t n = write(fd_, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Warn("writing %s failed: %s; tracing stops, the program goes on", path_,
           n < 0 ? strerror(errno) : "no progress");
      close(fd_);
      fd_ = -1;
      errno = saved_errno;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
    bytes_written_ += static_cast<uint64_t>(n);
  }
  errno = saved_errno;
  return true;
}

void Sink::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void Sink::Abandon() {
  if (fd_ >= 0) close(fd_);  // closes the child's copy of the descriptor only
  fd_ = -1;
}

}  // namespace cumemtrace::preload
