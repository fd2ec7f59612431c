// Test double support: writes the fake libcuda.so.1's ledger lines (format in the header).
#include "fake_ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace cumemtrace::fakes {
namespace {

// Appends printf-style text to buf[*used], never past `capacity`.
template <typename... Args>
void Append(char* buf, size_t capacity, size_t* used, const char* format, Args... args) {
  if (*used >= capacity) return;
  const int n = snprintf(buf + *used, capacity - *used, format, args...);
  if (n > 0) *used += static_cast<size_t>(n);
  if (*used > capacity) *used = capacity;
}

}  // namespace

Ledger::Ledger() {
  const char* path = getenv("FAKE_CUDA_LEDGER");
  if (path == nullptr || path[0] == '\0') return;
  const int saved_errno = errno;
  fd_ = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    fprintf(stderr, "fake libcuda: cannot open FAKE_CUDA_LEDGER=%s\n", path);
    abort();  // a test without its oracle must not pass
  }
  errno = saved_errno;
}

void Ledger::Write(const LedgerLine& line) const {
  if (fd_ < 0) return;
  const int saved_errno = errno;
  char buf[512];
  size_t used = 0;
  Append(buf, sizeof(buf), &used, "%s %s 0x%" PRIx64 " %" PRIu64 " %d pid=%d tid=%d dev=%d", line.op, line.api,
         line.address, line.size, line.result, static_cast<int>(getpid()), static_cast<int>(gettid()),
         line.device);
  if (line.has_stream) Append(buf, sizeof(buf), &used, " stream=0x%" PRIx64, line.stream);
  if (line.has_aux) Append(buf, sizeof(buf), &used, " aux=0x%" PRIx64, line.aux);
  if (line.has_mem_info) {
    Append(buf, sizeof(buf), &used, " free=%" PRIu64 " total=%" PRIu64, line.free_bytes, line.total_bytes);
  }
  if (line.via != nullptr && line.via[0] != '\0') Append(buf, sizeof(buf), &used, " via=%s", line.via);
  if (used >= sizeof(buf)) used = sizeof(buf) - 1;
  buf[used++] = '\n';
  size_t done = 0;
  while (done < used) {
    const ssize_t n = write(fd_, buf + done, used - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fprintf(stderr, "fake libcuda: cannot write the ledger\n");
      abort();
    }
    done += static_cast<size_t>(n);
  }
  errno = saved_errno;
}

}  // namespace cumemtrace::fakes
