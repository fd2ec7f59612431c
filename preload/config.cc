#include "preload/config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/log.h"

namespace cumemtrace::preload {
namespace {

constexpr const char* kDefaultOutput = "cumemtrace.%p.pb";

// Parses a non-negative decimal integer in [lo, hi]; returns `fallback` (and warns) for anything else.
int ReadInt(const char* name, int lo, int hi, int fallback) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  long value = strtol(text, &end, 10);
  if (*end != '\0' || value < lo || value > hi) {
    Warn("%s=%s is not a number in [%d, %d]; using %d", name, text, lo, hi, fallback);
    return fallback;
  }
  return static_cast<int>(value);
}

bool ReadFlag(const char* name) {
  const char* text = getenv(name);
  return text != nullptr && strcmp(text, "1") == 0;
}

bool AppendText(const char* text, char* out, size_t out_size, size_t* used) {
  size_t n = strlen(text);
  if (*used + n >= out_size) return false;
  memcpy(out + *used, text, n);
  *used += n;
  return true;
}

}  // namespace

bool ExpandOutputPattern(const char* pattern, int pid, const char* host, char* out, size_t out_size) {
  size_t used = 0;
  for (const char* p = pattern; *p != '\0'; ++p) {
    char piece[32];
    if (*p != '%') {
      piece[0] = *p;
      piece[1] = '\0';
      if (!AppendText(piece, out, out_size, &used)) return false;
      continue;
    }
    ++p;
    if (*p == 'p') {
      FormatDecimal(pid, piece, sizeof(piece));
      if (!AppendText(piece, out, out_size, &used)) return false;
    } else if (*p == 'h') {
      if (!AppendText(host, out, out_size, &used)) return false;
    } else if (*p == '%') {
      if (!AppendText("%", out, out_size, &used)) return false;
    } else {
      return false;
    }
  }
  out[used] = '\0';
  return true;
}

void ReadConfig(Config* config) {
  *config = Config{};
  config->disabled = ReadFlag("CUMEMTRACE_DISABLE");
  config->overwrite = ReadFlag("CUMEMTRACE_OVERWRITE");
  config->stack_depth = ReadInt("CUMEMTRACE_STACK_DEPTH", 0, kMaxStackDepth, 64);
  config->flush_ms = ReadInt("CUMEMTRACE_FLUSH_MS", 1, 3600 * 1000, 500);
  const char* python = getenv("CUMEMTRACE_PYTHON");
  config->python = python == nullptr || strcmp(python, "0") != 0;

  const char* pattern = getenv("CUMEMTRACE_OUTPUT");
  if (pattern == nullptr || *pattern == '\0') pattern = kDefaultOutput;
  char host[256] = "unknown-host";
  gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';
  if (!ExpandOutputPattern(pattern, getpid(), host, config->output_path, sizeof(config->output_path))) {
    Warn("CUMEMTRACE_OUTPUT=%s has an unknown %%-sequence (known: %%p %%h %%%%) or is too long; using %s",
         pattern, kDefaultOutput);
    ExpandOutputPattern(kDefaultOutput, getpid(), host, config->output_path, sizeof(config->output_path));
  }
}

}  // namespace cumemtrace::preload
