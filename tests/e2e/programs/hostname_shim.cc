// Test double, not part of cumemtrace: preloaded before libcumemtrace.so, its gethostname() answers a fixed name
// that cannot occur by chance, so the redact test can look for the host name byte by byte in a redacted trace.
#include <string.h>
#include <unistd.h>

extern "C" __attribute__((visibility("default"))) int gethostname(char* name, size_t len) {
  static const char kName[] = "cumemtrace-e2e-host-q7z";
  if (len < sizeof(kName)) return -1;
  memcpy(name, kName, sizeof(kName));
  return 0;
}
