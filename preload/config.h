// The preload's configuration, read once from the environment at the first event. Nothing here allocates.
//
//   CUMEMTRACE_OUTPUT      trace path; %p = pid, %h = host name, %% = '%' (default cumemtrace.%p.pb)
//   CUMEMTRACE_OVERWRITE   1: replace an existing file (default: never overwrite; warn and do not trace)
//   CUMEMTRACE_STACK_DEPTH native frames per event, 0..kMaxStackDepth (default 64; 0 = no stacks)
//   CUMEMTRACE_FLUSH_MS    how often buffered events reach the file (default 500; a process killed with SIGKILL
//                          loses at most this much)
//   CUMEMTRACE_DISABLE     1: record nothing (the hooks only forward)
//   CUMEMTRACE_PYTHON      0: no Python frames in stacks (default: Python frames where the interpreter is supported)
#ifndef CUMEMTRACE_PRELOAD_CONFIG_H_
#define CUMEMTRACE_PRELOAD_CONFIG_H_

#include <stddef.h>

namespace cumemtrace::preload {

inline constexpr int kMaxStackDepth = 256;
inline constexpr size_t kMaxPathBytes = 4096;

struct Config {
  char output_path[kMaxPathBytes];  // already expanded
  bool overwrite = false;
  int stack_depth = 64;
  int flush_ms = 500;
  bool disabled = false;
  bool python = true;
};

// Fills `config` from the environment. Bad values fall back to the defaults with a warning on stderr.
void ReadConfig(Config* config);

// Expands %p, %h and %% of `pattern` into `out` (size `out_size`). Returns false if the result does not fit or the
// pattern has an unknown %-sequence.
bool ExpandOutputPattern(const char* pattern, int pid, const char* host, char* out, size_t out_size);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_CONFIG_H_
