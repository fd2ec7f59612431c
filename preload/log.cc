#include "preload/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

namespace cumemtrace::preload {

void Warn(const char* format, ...) {
  int saved_errno = errno;
  char line[1024];
  int n = snprintf(line, sizeof(line), "cumemtrace: ");
  va_list args;
  va_start(args, format);
  int m = vsnprintf(line + n, sizeof(line) - n - 1, format, args);
  va_end(args);
  size_t len = n + (m < 0 ? 0 : (static_cast<size_t>(m) < sizeof(line) - n - 1 ? m : sizeof(line) - n - 2));
  line[len++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, len);
  (void)ignored;
  errno = saved_errno;
}

void FormatDecimal(long long value, char* out, size_t out_size) {
  snprintf(out, out_size, "%lld", value);
}

}  // namespace cumemtrace::preload
