// The preload's configuration, read once from the environment when tracing starts. Nothing here allocates.
//
//   CUMEMTRACE_OUTPUT       trace path; %p = pid, %h = host name, %r = rank ($RANK, else $LOCAL_RANK, else
//                           "pid<PID>"), %% = '%' (default cumemtrace.%p.pb)
//   CUMEMTRACE_OVERWRITE    1: replace an existing file (default: never overwrite; warn and do not trace)
//   CUMEMTRACE_STACK_DEPTH  native frames per event, 0..kMaxStackDepth (default 64; 0 = no stacks)
//   CUMEMTRACE_TORCH_STACK_DEPTH  native frames of a PyTorch block allocation made from Python, 1..kMaxStackDepth
//                           (default 16, never more than CUMEMTRACE_STACK_DEPTH): the allocator and the innermost
//                           op with its dispatcher entry; the user's lines are in the Python frames
//   CUMEMTRACE_FLUSH_MS     how often buffered events reach the file (default 500; a process killed with SIGKILL
//                           loses at most this much)
//   CUMEMTRACE_DISABLE      1: record nothing (the hooks only forward)
//   CUMEMTRACE_FOLLOW_FORK  1: a forked child of a tracing process starts its own trace (default: it stops)
//   CUMEMTRACE_FREE_STACKS  1: successful frees carry a stack too (default: stack 0; unwinding was 2/3 of the cost)
//   CUMEMTRACE_FOLLOW_EXEC  1: programs a tracing process starts trace too (default: they stay passive; session.cc)
//   CUMEMTRACE_SAMPLE_MS    driver free/total sampled per device at most this often (default 100; 0 = never)
//   CUMEMTRACE_PROCESS_SAMPLE_MS  the processes on each GPU in use (NVML) listed this often, on the flush thread
//                           (default 10000; 0 = only at failed allocations)
//   CUMEMTRACE_CUPTI        1: subscribe to CUPTI as a second source (default off: nothing CUPTI is loaded)
//   CUMEMTRACE_PYTHON       0: no Python frames (default on)
//   CUMEMTRACE_TORCH_BLOCKS 0: do not attach to PyTorch's caching allocator: segments only (default on)
//   CUMEMTRACE_COMPRESS     0: event batches written plain (default: zstd, one frame across batches)
//   CUMEMTRACE_TIME_RESOLUTION  events' times to 1ns (default), 10ns, ..., 1us, 10us, 100us or 1ms: for runs of
//                           hours (times are most of a compressed trace's bytes; no report needs nanoseconds)
//   CUMEMTRACE_QUIET        1: no "cumemtrace: wrote ..." line on stderr at a clean end (default: printed)
//   CUMEMTRACE_LINES        0: no file:line from debug info at exit (read by symbolize.cc)
//   CUMEMTRACE_NVTX         0: decline NVTX's injection call, so no phases (read by nvtx_injection.cc when NVTX
//                           calls it; NVTX calls only the library named by NVTX_INJECTION64_PATH, which the
//                           launcher sets to this one unless it is set already or --no-nvtx is given)
//   RANK, LOCAL_RANK, WORLD_SIZE  (set by torchrun / MPI launchers) the header's rank fields when numbers
#ifndef CUMEMTRACE_PRELOAD_CONFIG_H_
#define CUMEMTRACE_PRELOAD_CONFIG_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

inline constexpr int kMaxStackDepth = 256;
inline constexpr size_t kMaxPathBytes = 4096;
inline constexpr size_t kRankTextBytes = 32;

struct Config {
  char output_path[kMaxPathBytes];     // already expanded
  char output_pattern[kMaxPathBytes];  // as given (or the default when the given one was unusable)
  char host[256];
  char rank_text[kRankTextBytes];      // what %r expands to
  bool overwrite = false;
  int stack_depth = 64;
  int torch_stack_depth = 16;  // the recorder takes at most stack_depth
  int flush_ms = 500;
  bool disabled = false;
  bool follow_fork = false;
  bool free_stacks = false;  // unwind successful frees too (no report uses their stacks; heaptrack takes none)
  bool follow_exec = false;
  int sample_ms = 100;
  int process_sample_ms = 10000;
  bool cupti = false;
  bool python_frames = true;
  bool torch_blocks = true;
  bool quiet = false;
  bool tsc = true;  // times from the CPU's counter where the kernel's clock is on it (clock.h; CUMEMTRACE_TSC=0: never)
  bool compress = true;  // event batches compressed with zstd when libzstd.so.1 loads (CUMEMTRACE_COMPRESS=0: never)
  uint64_t time_unit_ns = 1;  // events' times are written to this resolution (CUMEMTRACE_TIME_RESOLUTION)
  int rank = -1;  // -1: unset or not a number
  int local_rank = -1;
  int world_size = -1;
};

// CUMEMTRACE_PYTHON is not 0 (also read at load, before the rest of the configuration).
bool PythonFramesWanted();

// Fills `config` from the environment. Bad values fall back to the defaults with a warning on stderr.
void ReadConfig(Config* config);

// CUMEMTRACE_TIME_RESOLUTION: "1ns" (the default), "1us", "10us", "100us" or "1ms" (a power of ten and a unit;
// "ns", "us" and "ms" alone mean 1 of them). Returns the resolution in ns, or 0 for anything else.
uint64_t ParseTimeResolution(const char* text);

// Parses a non-negative decimal integer that fits an int; -1 for anything else (also for nullptr and "").
int ParseRankNumber(const char* text);

// What %r expands to: `rank` when it names a number, else `local_rank` when it does, else "pid<pid>".
void RankText(const char* rank, const char* local_rank, int pid, char* out, size_t out_size);

// Expands %p, %h, %r and %% of `pattern` into `out` (size `out_size`). Returns false if the result does not fit or
// the pattern has an unknown %-sequence.
bool ExpandOutputPattern(const char* pattern, int pid, const char* host, const char* rank, char* out,
                         size_t out_size);

// The trace path of a forked child `pid` that starts its own trace: the pattern expanded with the child's pid; a
// pattern without %p gets ".<pid>" before a trailing ".pb" (or at the end), so parent and child never share a file.
bool ForkedChildOutputPath(const char* pattern, int pid, const char* host, const char* rank, char* out,
                           size_t out_size);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_CONFIG_H_
