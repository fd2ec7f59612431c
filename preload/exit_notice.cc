#include "preload/exit_notice.h"

#include <stdio.h>
#include <string.h>

namespace cumemtrace::preload {
namespace {

// True if `path` can be pasted into a shell as it is.
bool ShellSafe(const char* path) {
  for (const char* p = path; *p != '\0'; ++p) {
    const char c = *p;
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      strchr("/._-+,:@%=", c) != nullptr;
    if (!safe) return false;
  }
  return *path != '\0';
}

// `path` for a shell: as it is, or in single quotes with each ' written as '\''.
void QuotePath(const char* path, char* out, size_t out_size) {
  if (ShellSafe(path)) {
    snprintf(out, out_size, "%s", path);
    return;
  }
  size_t used = 0;
  auto put = [&](const char* text) {
    for (const char* t = text; *t != '\0' && used + 1 < out_size; ++t) out[used++] = *t;
  };
  put("'");
  for (const char* p = path; *p != '\0'; ++p) {
    if (*p == '\'') {
      put("'\\''");
    } else {
      const char one[2] = {*p, '\0'};
      put(one);
    }
  }
  put("'");
  out[used] = '\0';
}

}  // namespace

void FormatGrouped(uint64_t value, char* out, size_t out_size) {
  char digits[24];
  const int n = snprintf(digits, sizeof(digits), "%llu", static_cast<unsigned long long>(value));
  size_t used = 0;
  for (int i = 0; i < n && used + 1 < out_size; ++i) {
    if (i > 0 && (n - i) % 3 == 0 && used + 2 < out_size) out[used++] = ' ';
    out[used++] = digits[i];
  }
  if (out_size > 0) out[used < out_size ? used : out_size - 1] = '\0';
}

void FormatSize(uint64_t bytes, char* out, size_t out_size) {
  static const char* const kUnits[] = {"kB", "MB", "GB", "TB"};
  if (bytes < 1000) {
    snprintf(out, out_size, "%llu B", static_cast<unsigned long long>(bytes));
    return;
  }
  double value = static_cast<double>(bytes) / 1000.0;
  size_t unit = 0;
  // Switch units before rounding would print "1000.0".
  while (value >= 999.95 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    value /= 1000.0;
    ++unit;
  }
  snprintf(out, out_size, "%.1f %s", value, kUnits[unit]);
}

void DisplayPath(const char* path, const char* created_in, const char* started_in, char* out, size_t out_size) {
  const bool keep = path[0] == '/' || created_in[0] == '\0' || started_in[0] == '\0' ||
                    strcmp(created_in, started_in) == 0;
  const int n = keep ? snprintf(out, out_size, "%s", path)
                     : snprintf(out, out_size, "%s%s%s", created_in,
                                created_in[strlen(created_in) - 1] == '/' ? "" : "/", path);
  if (n < 0 || static_cast<size_t>(n) >= out_size) snprintf(out, out_size, "%s", path);  // no room: as given
}

void FormatWroteLine(const char* path, uint64_t events, uint64_t bytes, char* out, size_t out_size) {
  char count[32];
  char size[32];
  char quoted[1024];
  FormatGrouped(events, count, sizeof(count));
  FormatSize(bytes, size, sizeof(size));
  QuotePath(path, quoted, sizeof(quoted));
  snprintf(out, out_size, "wrote %s (%s event%s, %s): cumem-analyze %s", path, count, events == 1 ? "" : "s", size,
           quoted);
}

}  // namespace cumemtrace::preload
