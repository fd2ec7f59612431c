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

void CopyText(const char* text, char* out, size_t out_size) {
  size_t n = strlen(text);
  if (n >= out_size) n = out_size - 1;
  memcpy(out, text, n);
  out[n] = '\0';
}

// True if `pattern` has a %p (not the literal "%%p").
bool HasPidSequence(const char* pattern) {
  for (const char* p = pattern; *p != '\0'; ++p) {
    if (*p != '%') continue;
    ++p;
    if (*p == 'p') return true;
    if (*p == '\0') return false;
  }
  return false;
}

}  // namespace

int ParseRankNumber(const char* text) {
  if (text == nullptr || *text < '0' || *text > '9') return -1;
  char* end = nullptr;
  long value = strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 0x7fffffff) return -1;
  return static_cast<int>(value);
}

void RankText(const char* rank, const char* local_rank, int pid, char* out, size_t out_size) {
  int value = ParseRankNumber(rank);
  if (value < 0) value = ParseRankNumber(local_rank);
  if (value >= 0) {
    FormatDecimal(value, out, out_size);
    return;
  }
  char digits[24];
  FormatDecimal(pid, digits, sizeof(digits));
  size_t used = 0;
  out[0] = '\0';
  if (AppendText("pid", out, out_size, &used) && AppendText(digits, out, out_size, &used)) out[used] = '\0';
  else out[0] = '\0';
}

bool PythonFramesWanted() {
  const char* python = getenv("CUMEMTRACE_PYTHON");
  return python == nullptr || strcmp(python, "0") != 0;
}

bool ExpandOutputPattern(const char* pattern, int pid, const char* host, const char* rank, char* out,
                         size_t out_size) {
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
    } else if (*p == 'r') {
      if (!AppendText(rank, out, out_size, &used)) return false;
    } else if (*p == '%') {
      if (!AppendText("%", out, out_size, &used)) return false;
    } else {
      return false;
    }
  }
  out[used] = '\0';
  return true;
}

bool ForkedChildOutputPath(const char* pattern, int pid, const char* host, const char* rank, char* out,
                           size_t out_size) {
  if (!ExpandOutputPattern(pattern, pid, host, rank, out, out_size)) return false;
  if (HasPidSequence(pattern)) return true;
  char suffix[24] = ".";
  FormatDecimal(pid, suffix + 1, sizeof(suffix) - 1);
  size_t length = strlen(out);
  size_t insert_at = length >= 3 && strcmp(out + length - 3, ".pb") == 0 ? length - 3 : length;
  size_t extra = strlen(suffix);
  if (length + extra >= out_size) return false;
  memmove(out + insert_at + extra, out + insert_at, length - insert_at + 1);
  memcpy(out + insert_at, suffix, extra);
  return true;
}

uint64_t ParseTimeResolution(const char* text) {
  if (text == nullptr) return 0;
  uint64_t count = 0;
  const char* p = text;
  for (; *p >= '0' && *p <= '9' && count <= 1000; ++p) count = count * 10 + static_cast<uint64_t>(*p - '0');
  if (p == text) count = 1;
  if (count != 1 && count != 10 && count != 100) return 0;
  if (strcmp(p, "ns") == 0) return count;
  if (strcmp(p, "us") == 0) return count * 1000;
  if (strcmp(p, "ms") == 0 && count == 1) return 1000000;
  return 0;
}

void ReadConfig(Config* config) {
  *config = Config{};
  config->disabled = ReadFlag("CUMEMTRACE_DISABLE");
  config->overwrite = ReadFlag("CUMEMTRACE_OVERWRITE");
  config->stack_depth = ReadInt("CUMEMTRACE_STACK_DEPTH", 0, kMaxStackDepth, 64);
  config->torch_stack_depth = ReadInt("CUMEMTRACE_TORCH_STACK_DEPTH", 1, kMaxStackDepth, 16);
  config->flush_ms = ReadInt("CUMEMTRACE_FLUSH_MS", 1, 3600 * 1000, 500);
  config->sample_ms = ReadInt("CUMEMTRACE_SAMPLE_MS", 0, 3600 * 1000, 100);
  config->process_sample_ms = ReadInt("CUMEMTRACE_PROCESS_SAMPLE_MS", 0, 3600 * 1000, 10000);
  config->follow_fork = ReadFlag("CUMEMTRACE_FOLLOW_FORK");
  config->free_stacks = ReadFlag("CUMEMTRACE_FREE_STACKS");
  config->follow_exec = ReadFlag("CUMEMTRACE_FOLLOW_EXEC");
  config->cupti = ReadFlag("CUMEMTRACE_CUPTI");
  config->python_frames = PythonFramesWanted();
  const char* torch_blocks = getenv("CUMEMTRACE_TORCH_BLOCKS");
  config->torch_blocks = torch_blocks == nullptr || strcmp(torch_blocks, "0") != 0;
  const char* tsc = getenv("CUMEMTRACE_TSC");
  config->tsc = tsc == nullptr || strcmp(tsc, "0") != 0;
  const char* compress = getenv("CUMEMTRACE_COMPRESS");
  config->compress = compress == nullptr || strcmp(compress, "0") != 0;
  const char* resolution = getenv("CUMEMTRACE_TIME_RESOLUTION");
  if (resolution != nullptr && *resolution != '\0') {
    config->time_unit_ns = ParseTimeResolution(resolution);
    if (config->time_unit_ns == 0) {
      Warn("CUMEMTRACE_TIME_RESOLUTION=%s is not one of 1ns 10ns 100ns 1us 10us 100us 1ms; using 1ns", resolution);
      config->time_unit_ns = 1;
    }
  }
  config->quiet = ReadFlag("CUMEMTRACE_QUIET");
  config->rank = ParseRankNumber(getenv("RANK"));
  config->local_rank = ParseRankNumber(getenv("LOCAL_RANK"));
  config->world_size = ParseRankNumber(getenv("WORLD_SIZE"));
  RankText(getenv("RANK"), getenv("LOCAL_RANK"), getpid(), config->rank_text, sizeof(config->rank_text));

  CopyText("unknown-host", config->host, sizeof(config->host));
  gethostname(config->host, sizeof(config->host) - 1);
  config->host[sizeof(config->host) - 1] = '\0';
  const char* pattern = getenv("CUMEMTRACE_OUTPUT");
  if (pattern == nullptr || *pattern == '\0') pattern = kDefaultOutput;
  CopyText(pattern, config->output_pattern, sizeof(config->output_pattern));
  if (strlen(pattern) >= sizeof(config->output_pattern) ||
      !ExpandOutputPattern(pattern, getpid(), config->host, config->rank_text, config->output_path,
                           sizeof(config->output_path))) {
    Warn("CUMEMTRACE_OUTPUT=%s has an unknown %%-sequence (known: %%p %%h %%r %%%%) or is too long; using %s",
         pattern, kDefaultOutput);
    CopyText(kDefaultOutput, config->output_pattern, sizeof(config->output_pattern));
    ExpandOutputPattern(kDefaultOutput, getpid(), config->host, config->rank_text, config->output_path,
                        sizeof(config->output_path));
  }
}

}  // namespace cumemtrace::preload
