#include "preload/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/config.h"
#include "preload/log.h"

namespace cumemtrace::preload {
namespace {

constexpr int kCreateFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
constexpr mode_t kMode = 0600;

// CUMEMTRACE_OVERWRITE=1 replaces only a regular file. Anything else at the name (a device: as root,
// CUMEMTRACE_OUTPUT=/dev/full once replaced the system's /dev/full; a FIFO, a socket, a directory) is left alone, and
// so is a symbolic link, whatever it points to: following it would write where the link's owner chose, and replacing
// it would remove a name someone made on purpose (/dev/stdout is a link to /proc/self/fd/1, which is a regular file
// whenever stdout is redirected to one). Returns what stands at the name when it may not be replaced, else nullptr.
const char* NotReplaceable(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return nullptr;
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISDIR(st.st_mode)) return "a directory";
  return "not a regular file";
}

// Puts the new file `temporary` at `path`, replacing a regular file there. The check and the replacement see the
// same object: the two names are exchanged atomically (RENAME_EXCHANGE) and what came out is checked; if it is not
// a regular file (something else was put at the name after the first look), it is exchanged back at once. Where
// the file system cannot exchange, the look just before a plain rename is the check. Returns 0; or -1 with errno
// set, or with `*refused` naming what stands at `path`.
int PutInPlace(const char* temporary, const char* path, const char** refused) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    struct stat st;
    if (lstat(path, &st) != 0) {
      if (errno != ENOENT) return -1;
      // Nothing there: take the name unless something appeared there meanwhile (then look again).
      if (renameat2(AT_FDCWD, temporary, AT_FDCWD, path, RENAME_NOREPLACE) == 0) return 0;
      if (errno == EEXIST) continue;
      if (errno != EINVAL && errno != ENOSYS) return -1;
      return rename(temporary, path);
    }
    if ((*refused = NotReplaceable(st)) != nullptr) return -1;
    if (renameat2(AT_FDCWD, temporary, AT_FDCWD, path, RENAME_EXCHANGE) != 0) {
      if (errno == ENOENT) continue;  // gone meanwhile: take the name
      if (errno != EINVAL && errno != ENOSYS) return -1;
      return rename(temporary, path);  // no exchange on this file system: the look above is the check
    }
    struct stat old;
    if (lstat(temporary, &old) == 0 && (*refused = NotReplaceable(old)) != nullptr) {
      if (renameat2(AT_FDCWD, temporary, AT_FDCWD, path, RENAME_EXCHANGE) != 0) {
        // Cannot happen short of the folder vanishing; the name keeps the new file, the old object the other name.
        Warn("%s was moved to %s and could not be moved back", path, temporary);
        *refused = nullptr;
        return 0;
      }
      return -1;  // the caller removes the new file, back under the temporary name
    }
    unlink(temporary);  // the old file, now under the temporary name
    return 0;
  }
  errno = EBUSY;  // the name kept changing under us
  return -1;
}

// CUMEMTRACE_OVERWRITE=1: a new file beside `path`, put in place at once (PutInPlace). Returns the descriptor, or -1
// with errno set or with `*refused` naming what stands at `path`.
int CreateReplacing(const char* path, const char** refused) {
  char temporary[kMaxPathBytes + 48];
  char pid[24];
  FormatDecimal(getpid(), pid, sizeof(pid));
  if (snprintf(temporary, sizeof(temporary), "%s.cumemtrace-new.%s", path, pid) >=
      static_cast<int>(sizeof(temporary))) {
    errno = ENAMETOOLONG;
    return -1;
  }
  // A first look, before anything is created beside it.
  struct stat st;
  if (lstat(path, &st) == 0 && (*refused = NotReplaceable(st)) != nullptr) return -1;
  int fd = open(temporary, kCreateFlags, kMode);
  if (fd < 0) return -1;
  if (PutInPlace(temporary, path, refused) != 0) {
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
  const char* refused = nullptr;
  fd_ = overwrite ? CreateReplacing(path, &refused) : open(path, kCreateFlags, kMode);
  failed_ = false;
  failed_errno_ = 0;
  if (fd_ < 0) {
    if (refused != nullptr) {
      Warn("%s is %s; CUMEMTRACE_OVERWRITE replaces only a regular file; not tracing this process", path, refused);
    } else if (errno == EEXIST) {
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

namespace {

// Room kept below a file size limit for the last packet, the notice that says why the trace ends there (its message
// is at most 200 bytes).
constexpr uint64_t kLastPacketRoom = 256;

// The end of the last whole packet of `data` (packets framed as Trace.packet: tag 0x0a, varint length) that ends at
// or before `limit`.
size_t WholePacketsWithin(const uint8_t* data, size_t size, uint64_t limit) {
  size_t end = 0;
  while (end < size && data[end] == 0x0a) {
    size_t p = end + 1;
    uint64_t length = 0;
    for (int shift = 0; p < size && shift < 64; shift += 7) {
      const uint8_t byte = data[p++];
      length |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) break;
    }
    if (length > size - p || p + length > limit) break;
    end = p + static_cast<size_t>(length);
  }
  return end;
}

// Bytes the file size limit (RLIMIT_FSIZE, `ulimit -f`) still lets a file of `size` bytes grow by; UINT64_MAX
// without a limit.
uint64_t FileSizeRoom(uint64_t size) {
  rlimit limit;
  if (getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  return limit.rlim_cur > size ? limit.rlim_cur - size : 0;
}

}  // namespace

uint64_t Sink::Room() const {
  const uint64_t room = FileSizeRoom(bytes_written_);
  if (room == UINT64_MAX) return room;
  return room > kLastPacketRoom ? room - kLastPacketRoom : 0;
}

bool Sink::Write(const uint8_t* data, size_t size) {
  if (fd_ < 0 || failed_) return false;
  int saved_errno = errno;
  const uint64_t start = bytes_written_;
  // Never past a file size limit: a write that starts there fails with EFBIG and sends the writing thread SIGXFSZ,
  // which ends the program unless it ignores the signal. Only the whole packets that fit go, leaving room for the
  // last notice, and the write then fails as the kernel would have failed it.
  const uint64_t room = Room();
  const size_t allowed = size <= room ? size : WholePacketsWithin(data, size, room);
  size_t done = 0;
  int error = allowed < size ? EFBIG : 0;
  while (done < allowed) {
    ssize_t n = write(fd_, data + done, allowed - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
    bytes_written_ += static_cast<uint64_t>(n);
  }
  if (error == 0) {
    errno = saved_errno;
    return true;
  }
  failed_errno_ = error;
  Warn("writing %s failed: %s; tracing stops, the program goes on", path_, strerror(failed_errno_));
  failed_ = true;
  // Whole packets only: what reached the file past the last whole packet goes, which also frees room for WriteLast.
  const size_t kept = WholePacketsWithin(data, done, done);
  if (kept < done) {
    if (ftruncate(fd_, static_cast<off_t>(start + kept)) == 0 &&
        lseek(fd_, static_cast<off_t>(start + kept), SEEK_SET) >= 0) {
      bytes_written_ = start + kept;
    } else {
      close(fd_);
      fd_ = -1;
    }
  }
  errno = saved_errno;
  return false;
}

bool Sink::WriteLast(const uint8_t* data, size_t size) {
  if (fd_ < 0) return false;
  int saved_errno = errno;
  const uint64_t start = bytes_written_;
  bool ok = size <= FileSizeRoom(start);  // past the limit the write would send SIGXFSZ
  while (ok && size > 0) {
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
