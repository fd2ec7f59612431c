#include "preload/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "preload/config.h"
#include "preload/log.h"

namespace cumemtrace::preload {
namespace {

constexpr int kCreateFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
constexpr mode_t kMode = 0600;

// CUMEMTRACE_OVERWRITE=1: a new file beside `path`, renamed over it at once (rename replaces a link, never its
// target). Returns the descriptor, or -1 with errno set.
int CreateReplacing(const char* path) {
  char temporary[kMaxPathBytes + 48];
  char pid[24];
  FormatDecimal(getpid(), pid, sizeof(pid));
  if (snprintf(temporary, sizeof(temporary), "%s.cumemtrace-new.%s", path, pid) >=
      static_cast<int>(sizeof(temporary))) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd = open(temporary, kCreateFlags, kMode);
  if (fd < 0) return -1;
  if (rename(temporary, path) != 0) {
    int saved = errno;
    unlink(temporary);
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

}  // namespace

bool Sink::Open(const char* path, bool overwrite) {
  int saved_errno = errno;
  fd_ = overwrite ? CreateReplacing(path) : open(path, kCreateFlags, kMode);
  failed_ = false;
  failed_errno_ = 0;
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
  if (fd_ < 0 || failed_) return false;
  int saved_errno = errno;
  const uint64_t start = bytes_written_;
  while (size > 0) {
    ssize_t n = write(fd_, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_errno_ = n < 0 ? errno : ENOSPC;
      Warn("writing %s failed: %s; tracing stops, the program goes on", path_, strerror(failed_errno_));
      failed_ = true;
      // Whole packets only: the part of this call that reached the file goes, which also frees room for WriteLast.
      if (ftruncate(fd_, static_cast<off_t>(start)) == 0 && lseek(fd_, static_cast<off_t>(start), SEEK_SET) >= 0) {
        bytes_written_ = start;
      } else {
        close(fd_);
        fd_ = -1;
      }
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

bool Sink::WriteLast(const uint8_t* data, size_t size) {
  if (fd_ < 0) return false;
  int saved_errno = errno;
  const uint64_t start = bytes_written_;
  bool ok = true;
  while (size > 0) {
    ssize_t n = write(fd_, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      if (ftruncate(fd_, static_cast<off_t>(start)) != 0) {
        // Nothing more can be done: the reader treats a partial last packet as a cut-off end.
      }
      break;
    }
    data += n;
    size -= static_cast<size_t>(n);
    bytes_written_ += static_cast<uint64_t>(n);
  }
  close(fd_);
  fd_ = -1;
  errno = saved_errno;
  return ok;
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
