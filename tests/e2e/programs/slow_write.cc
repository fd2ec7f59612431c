// A slow disk for the end-to-end tests, preloaded before the preload: every write(2) to a file whose name ends in
// ".pb" (the trace) first sleeps SLOW_WRITE_MS milliseconds. Other writes pass straight through.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace {

bool IsTrace(int fd) {
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char path[4096];
  const ssize_t n = readlink(link, path, sizeof(path) - 1);
  if (n < 3) return false;
  path[n] = '\0';
  return strcmp(path + n - 3, ".pb") == 0;
}

}  // namespace

extern "C" ssize_t write(int fd, const void* data, size_t size) {
  using WriteFn = ssize_t (*)(int, const void*, size_t);
  static WriteFn real = reinterpret_cast<WriteFn>(dlsym(RTLD_NEXT, "write"));
  const char* ms = getenv("SLOW_WRITE_MS");
  if (ms != nullptr && IsTrace(fd)) usleep(static_cast<useconds_t>(atoi(ms)) * 1000);
  return real(fd, data, size);
}
