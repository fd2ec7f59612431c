// The life of this process's trace: whether this process traces at all, starting at the first event
// (configuration, file, header), and finishing at exit (symbols, trailer).
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "preload/cupti_source.h"
#include "preload/driver_helpers.h"
#include "preload/exit_notice.h"
#include "preload/gpu_processes.h"
#include "preload/log.h"
#include "preload/unwind_memo.h"
#include "preload/native_stack.h"
#include "preload/process_tree.h"
#include "preload/python_frames.h"
#include "preload/recorder.h"
#include "preload/recorder_state.h"
#include "preload/symbolize.h"
#include "preload/thread_name_hook.h"
#include "preload/torch_tracker.h"
#include "preload/trace_writer.h"

#ifndef CUMEMTRACE_VERSION
#define CUMEMTRACE_VERSION "unknown"
#endif

namespace cumemtrace::preload {
namespace {

// Reads /proc/self/cmdline into `buffer` and points argv at its NUL-separated pieces.
int ReadArgv(char* buffer, size_t size, const char** argv, int max_args) {
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buffer, size - 1);
  close(fd);
  if (n <= 0) return 0;
  buffer[n] = '\0';
  int argc = 0;
  for (ssize_t i = 0; i < n && argc < max_args; i += static_cast<ssize_t>(strlen(buffer + i)) + 1) {
    argv[argc++] = buffer + i;
  }
  return argc;
}

// Writes the ranges opened before tracing started, each after a Thread packet for its thread. Called with
// g_locks.record held, right after the header.
void WritePendingPhasesLocked() {
  ByteBuffer* out = g_output.packets();
  PendingPhases& pending = g_tables.pending_phases;
  for (size_t i = 0; i < pending.size(); ++i) {
    const PendingPhase& p = pending.at(i);
    if (!WriteThread(out, p.thread, p.tid, p.thread_name)) out->ClearError();
    PhaseRecord r{0, p.time_ns, p.thread, p.kind, p.name, p.name_size, p.range_id, p.domain};
    if (!WritePhase(out, r)) out->ClearError();
  }
  pending.Clear();
}

void WriteHeaderLocked() {
  static char cmdline[16384];
  static const char* argv[256];
  const Config& config = g_session.config;
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  exe[n < 0 ? 0 : n] = '\0';
  timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  HeaderInfo h{};
  h.tool_version = CUMEMTRACE_VERSION;
  h.pid = getpid();
  h.ppid = getppid();
  h.argc = ReadArgv(cmdline, sizeof(cmdline), argv, 256);
  h.argv = argv;
  h.hostname = host;
  h.executable = exe;
  h.start_time_ns = g_session.start_ns;
  h.start_unix_time_ns = static_cast<int64_t>(wall.tv_sec) * 1000000000 + wall.tv_nsec;
  DriverVersion(&h.driver_version);
  h.stack_depth = static_cast<uint32_t>(config.stack_depth);
  h.torch_stack_depth = static_cast<uint32_t>(TorchStackDepth());
  h.rank = config.rank;
  h.local_rank = config.local_rank;
  h.world_size = config.world_size;
  h.forked_child = g_session.forked_child;
  h.cupti_enabled = g_session.cupti_enabled;
  h.python_frames_enabled = config.python_frames;
  if (!WriteHeader(g_output.packets(), h)) g_output.packets()->ClearError();
  h.argv = nullptr;  // the copy carries none of these
  h.argc = 0;
  h.hostname = h.executable = h.tool_version = nullptr;
  pthread_mutex_lock(&g_locks.io);
  g_output.header_copy = h;
  g_output.next_header_copy_at = 1;
  pthread_mutex_unlock(&g_locks.io);
}

// CUMEMTRACE_CUPTI=1: subscribes once per process; a forked child keeps its parent's subscription (or failure) and
// does not warn again. Called under g_locks.start, before the header (which says whether it worked).
void StartCuptiOnce() {
  if (!g_session.config.cupti) return;
  if (!g_session.cupti_tried) {
    g_session.cupti_tried = true;
    g_session.cupti_enabled = StartCupti(g_session.cupti_failure, sizeof(g_session.cupti_failure));
    if (!g_session.cupti_enabled) {
      Warn("CUPTI unavailable (%s); tracing goes on with interposition only", g_session.cupti_failure);
    }
  }
}

// The notice of a CUMEMTRACE_CUPTI=1 that did not work. Called with g_locks.record held.
void NoteCuptiUnavailableLocked() {
  char message[320];
  size_t n = strlen(g_session.cupti_failure);
  memcpy(message, "CUPTI unavailable: ", 19);
  if (n > sizeof(message) - 20) n = sizeof(message) - 20;
  memcpy(message + 19, g_session.cupti_failure, n);
  message[19 + n] = '\0';
  if (!WriteNotice(g_output.packets(), static_cast<uint32_t>(format::NoticeCode::kCuptiUnavailable), message,
                   g_session.start_ns)) {
    g_output.packets()->ClearError();
  }
}

// The working folder when the preload was loaded (the folder of the shell that started the program, as far as it
// can be known), and the trace's path as the line at exit prints it (DisplayPath). "" where unknown.
char g_started_in[kMaxPathBytes];
char g_display_path[kMaxPathBytes];

// Opens the trace file: the configuration is read here (a forked child keeps its parent's, with a file of its
// own). Called under g_locks.start. Returns false when this process does not trace.
bool OpenTrace() {
  Config& config = g_session.config;
  if (g_session.forked_before_start) {
    // Forked before the parent's first event: the parent is the process that traces, whoever calls CUDA first. This
    // child traces only with follow-fork, under a name of its own; it never takes the parent's file.
    g_session.forked_before_start = false;
    ReadConfig(&config);
    if (!config.follow_fork) return false;
    g_session.forked_child = true;
  }
  bool path_ok = true;
  if (!g_session.forked_child) {
    ReadConfig(&config);
  } else {
    // The parent's configuration stands; only the file is the child's own.
    path_ok = ForkedChildOutputPath(config.output_pattern, getpid(), config.host, config.rank_text,
                                    config.output_path, sizeof(config.output_path));
    if (!path_ok) Warn("no room for the forked child's pid in the trace path; not tracing process %d", getpid());
  }
  if (!path_ok || config.disabled || !g_output.queue.Init(1 << 20) ||
      !g_output.sink.Open(config.output_path, config.overwrite)) {
    return false;
  }
  char created_in[kMaxPathBytes] = "";
  if (config.output_path[0] != '/' && getcwd(created_in, sizeof(created_in)) == nullptr) created_in[0] = '\0';
  DisplayPath(config.output_path, created_in, g_started_in, g_display_path, sizeof(g_display_path));
  return true;
}

void FinishTrace() {
  if (!g_session.running()) return;
  ThreadState& self = Self();
  ++self.in_recorder;
  RefreshModules();
  RetryPythonLookup();  // a Python loaded since the last flush still gets its notice
  NoteTorchTrackerAtEnd(g_session.config.torch_blocks);
  UnwindMemoReport();
  g_locks.record.Lock();
  if (g_session.running()) {
    g_output.stop_flusher = true;
    g_output.flusher_wake.Signal();
    g_session.Stop();  // events from destructors that run after this one are not recorded
    FlushNowLocked();
    pthread_mutex_lock(&g_locks.io);  // the stack table is the writer's
    WriteSymbolTable(g_output.packets(), g_output.stacks, g_modules.map, &g_tables.strings);
    pthread_mutex_unlock(&g_locks.io);
    FlushNowLocked();
    // The queue is empty and stays so (g_locks.record is held): the trailer goes straight to the sink, with the
    // counters of every unit written.
    pthread_mutex_lock(&g_locks.io);
    ByteBuffer* out = g_output.packets();  // the open unit: the flushes above sealed and wrote all before it
    Sink& sink = g_output.sink;
    TrailerRecord t{};
    g_health.FillTrailer(&t);
    t.bytes_written = sink.bytes_written();
    t.stack_nodes = g_output.stacks.node_count();
    t.end_time_ns = NowNs();
    const ClockHealth clock = ClockHealthNow();
    t.clock_calibrations = clock.calibrations;
    t.clock_max_error_ns = clock.max_error_ns;
    t.clock_steps = clock.steps;
    // One more copy of what a reader needs of the header, far from the header in all but the smallest traces.
    if (!WriteHeaderCopy(out, g_output.header_copy)) out->ClearError();
    if (WriteTrailer(out, t) && !sink.Write(out->data(), out->size()) && sink.failed()) {
      NoteWriteFailureIoLocked(out);  // as for any other packet: the file says why it has no trailer
    }
    out->Clear();
    sink.Close();
    const uint64_t events = g_health.writing.events;
    if (!g_session.config.quiet && events > 0) {  // say where the trace went; a process that traced nothing is silent
      char line[1024];
      FormatWroteLine(g_display_path, events, sink.bytes_written(), line, sizeof(line));
      Warn("%s", line);
    }
    pthread_mutex_unlock(&g_locks.io);
  }
  g_locks.record.Unlock();
  --self.in_recorder;
}

// Exec'd children: the first process that loads the preload records its pid in CUMEMTRACE_ROOT_PID (children
// inherit it); a process that finds its own pid there is a root that exec'd and goes on tracing in the new image.
// One that finds another pid decides at its first event (StaysPassive), not here: whether the process that started
// it traces is known only once that process made its own first call, if it ever does.
void NoteRootPid() {
  char pid_text[24];
  FormatDecimal(getpid(), pid_text, sizeof(pid_text));
  const char* root = getenv("CUMEMTRACE_ROOT_PID");
  if (root == nullptr || root[0] == '\0') {
    setenv("CUMEMTRACE_ROOT_PID", pid_text, 1);
  } else {
    g_session.started_by_other = strcmp(root, pid_text) != 0;
  }
}

// A process started by another that loaded the preload records nothing when a process above it traces, unless
// CUMEMTRACE_FOLLOW_EXEC=1: the program's helpers (compilers, nvidia-smi, multiprocessing's spawned workers) leave no
// traces of their own. Started by one that never traced (LD_PRELOAD=... timeout 60 python train.py: timeout
// allocates nothing), it traces. Where /proc cannot tell, it stays passive. Called under g_locks.start.
bool StaysPassive() {
  // A forked child of a process that traces follows CUMEMTRACE_FOLLOW_FORK instead (OpenTrace).
  if (!g_session.started_by_other || g_session.forked_child) return false;
  const char* follow = getenv("CUMEMTRACE_FOLLOW_EXEC");
  if (follow != nullptr && strcmp(follow, "1") == 0) return false;
  // Forked before its parent's first event: the rule is its parent's, whose own first event may come later (or
  // came meanwhile: the parent's flush thread must not count against the child).
  const pid_t from = g_session.forked_before_start ? getppid() : getpid();
  return AncestorOf(from) != AncestorTracing::kNo;
}

__attribute__((constructor)) void OnLoad() {
  int saved_errno = errno;
  InstallForkHandlers();
  NoteRootPid();
  if (getcwd(g_started_in, sizeof(g_started_in)) == nullptr) g_started_in[0] = '\0';
  ResolveThreadNaming();
  // Looked up here, where no lock of the recorder is held: dlsym takes the loader's lock, and a thread inside
  // dlopen (holding it) may make the first CUDA call while another starts tracing. A Python loaded later is found
  // by the flush thread.
  InitPythonFrames(PythonFramesWanted());
  dlerror();  // failed lookups leave a message the program's own dlerror() must not see
  errno = saved_errno;
}

// Runs after the program's atexit handlers and the destructors of libraries loaded after this one (libcuda,
// PyTorch), so frees made while they shut down are still recorded.
__attribute__((destructor)) void OnUnload() { FinishTrace(); }

}  // namespace

void Start() {
  pthread_mutex_lock(&g_locks.start);
  if (g_session.state.load(std::memory_order_acquire) != kUninitialized) {
    pthread_mutex_unlock(&g_locks.start);
    return;
  }
  g_session.state.store(kStarting, std::memory_order_release);
  if (StaysPassive() || !OpenTrace()) {
    g_session.Stop();
    pthread_mutex_unlock(&g_locks.start);
    return;
  }
  StartClock(g_session.config.tsc);
  g_session.start_ns = NowNs();
  g_tables.sampler.Reset(static_cast<int64_t>(g_session.config.sample_ms) * 1000000);
  ResetGpuProcessSampling(static_cast<int64_t>(g_session.config.process_sample_ms) * 1000000);
  InitNativeStacks();
  StartCuptiOnce();
  g_locks.record.Lock();
  WriteHeaderLocked();
  WritePendingPhasesLocked();
  NotePythonSupportLocked(PythonFramesSupport(), PythonSupportMessage());
  if (g_session.config.cupti && !g_session.cupti_enabled) NoteCuptiUnavailableLocked();
  // Written now, on this thread: a trace file that exists always starts with its header, even in a forked child
  // that ends with _exit before its flush thread wrote anything. The one write of the header the program waits for.
  FlushNowLocked();
  g_locks.record.Unlock();
  RefreshModules();
  // Running before the flush thread starts: it leaves at any other state.
  g_session.state.store(kRunning, std::memory_order_release);
  StartFlusher();
  pthread_mutex_unlock(&g_locks.start);
}

bool Tracing() {
  int state = g_session.state.load(std::memory_order_acquire);
  if (state == kRunning) return Self().in_recorder == 0;
  if (state == kOff) return false;
  ThreadState& self = Self();
  if (self.in_recorder != 0) return false;
  // Uninitialized, or another thread is starting: Start() waits for it.
  ++self.in_recorder;
  int saved_errno = errno;
  Start();
  errno = saved_errno;
  --self.in_recorder;
  return g_session.running();
}

bool TracingStarted() { return g_session.running() && Self().in_recorder == 0; }

}  // namespace cumemtrace::preload
