#include "preload/recorder.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "preload/byte_buffer.h"
#include "preload/config.h"
#include "preload/cupti_source.h"
#include "preload/driver_helpers.h"
#include "preload/event_record.h"
#include "preload/exit_notice.h"
#include "preload/log.h"
#include "preload/module_map.h"
#include "preload/native_stack.h"
#include "preload/output_queue.h"
#include "preload/phase_pending.h"
#include "preload/python_frame_table.h"
#include "preload/python_frames.h"
#include "preload/python_splice.h"
#include "preload/sequence.h"
#include "preload/sink.h"
#include "preload/stack_table.h"
#include "preload/string_table.h"
#include "preload/symbolize.h"
#include "preload/torch_tracker.h"
#include "preload/trace_writer.h"

#ifndef CUMEMTRACE_VERSION
#define CUMEMTRACE_VERSION "unknown"
#endif

namespace cumemtrace::preload {
namespace {

enum State : int { kUninitialized, kStarting, kRunning, kOff };

constexpr int kMaxDevices = 64;
// Native frames taken of a driver allocation when stacks are off, only to see whether PyTorch's caching allocator
// asks for it (frames 3 to 6 of the segment stacks in examples/gpt2_blocks_h100.pb, torch 2.11).
constexpr int kAttachStackDepth = 32;

__thread ThreadState t_self __attribute__((tls_model("initial-exec")));

std::atomic<int> g_state{kUninitialized};
std::atomic<uint64_t> g_wrapper_slots_exhausted{0};
std::atomic<uint64_t> g_dropped{0};

pthread_mutex_t g_start_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;  // everything below, unless marked otherwise
pthread_mutex_t g_module_lock = PTHREAD_MUTEX_INITIALIZER;  // g_modules scans (taken before g_lock, never after)
// The writer's lock: the sink, writing the sealed units of g_output, and the counters marked so. Taken after g_lock
// or alone, never before it: the flush thread writes holding this lock only, so no recording thread waits for I/O.
pthread_mutex_t g_io_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_flusher_wake = PTHREAD_COND_INITIALIZER;

Config g_config;
Sink g_sink;                    // under g_io_lock
OutputQueue g_output;           // its open unit under g_lock, its sealed ones under g_io_lock (output_queue.h)
StackTable g_stacks;            // under g_io_lock: the writer interns the stacks the recording threads kept
StringTable g_strings;          // every string id of the trace
PythonFrameTable g_python_frames;
bool g_python_notice_written = false;
bool g_python_broken_notice_written = false;
ModuleMap g_modules;
uint32_t g_next_thread_index = 1;
bool g_device_written[kMaxDevices + 1];  // index ordinal + 1; 0 = host
bool g_stop_flusher = false;
int64_t g_start_ns = 0;
bool g_forked_child = false;  // this process is a forked child that starts (or started) a trace of its own
bool g_forked_before_start = false;  // forked from a process that had not started tracing yet
bool g_modules_unwritten = false;  // a forked child's new trace: every known module is written again
bool g_cupti_tried = false;   // CUMEMTRACE_CUPTI=1: StartCupti ran once in this process (or its parent)
bool g_cupti_enabled = false;
char g_cupti_failure[256];
MemorySampler g_sampler;      // lock-free; reset at start
PendingPhases g_pending_phases;  // NVTX ranges opened before tracing started (under g_start_lock and g_lock)

// Health counters for the trailer.
uint64_t g_events = 0;  // under g_io_lock
uint64_t g_unwind_failures = 0;
uint64_t g_truncated_stacks = 0;
uint64_t g_dropped_frames = 0;  // frames left out of the middle of stacks deeper than the depth
uint64_t g_recorder_ns = 0;
// Parts of g_recorder_ns, clocked on other events (trailer recorder_*_ns): where the recorder's time goes in a
// real program, on a machine with no profiler.
uint64_t g_recorder_python_ns = 0;     // reading the thread's Python frames
uint64_t g_recorder_unwind_ns = 0;     // the native unwind
uint64_t g_recorder_lock_wait_ns = 0;  // waiting for g_lock
uint64_t g_recorder_stack_ns = 0;      // Python frame ids, splicing, keeping the stack for the writer
uint64_t g_flushes = 0;        // units written (under g_io_lock)
uint64_t g_writer_ns = 0;       // interning, encoding and writing sealed units, on any thread (under g_io_lock)
uint64_t g_stalled_seals = 0;   // a recording thread found every sealed slot taken and wrote them itself
uint64_t g_python_stacks = 0;
uint64_t g_python_failures = 0;
uint64_t g_memory_samples = 0;
uint64_t g_cupti_only_events = 0;
uint64_t g_allocator_events = 0;
uint64_t g_allocator_ignored = 0;
uint32_t g_notices_written = 0;  // bit per format::NoticeCode written by NoteOnce

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The recorder's own time (trailer recorder_time_ns) is clocked on one event in kTimedOneIn, drawn at random per
// thread, and scaled up: clock reads were 5.6 % of bench/torch_workload.py's traced time in perf, half of them only
// to add this up; a random draw keeps any periodic pattern of the program from biasing the sum. Its parts
// (recorder_*_ns) take five more clock reads (32-36 ns each on the H100 machine, bench/clock_cost.c): they are
// clocked on another 1 in kPartsOneIn, so that those reads do not inflate the total; they add 5 x 34 / 64 ~ 3 ns
// per event (at 1 in 16, ~10 ns, for a breakdown that needs far fewer samples). A thread's first
// kClockedFirst events are all clocked, both ways, at weight 1: they carry the one-time costs (cold caches, the
// tables' first pages, up to a millisecond), which scaled by 16 would swamp the estimate of a short run.
constexpr uint64_t kTimedOneIn = 16;
constexpr uint64_t kPartsOneIn = 64;
constexpr uint32_t kClockedFirst = 64;

// How an event is clocked: the events it stands for in the total (recorder_time_ns) and in the parts
// (recorder_*_ns); 0 where it is not clocked that way.
struct Timing {
  uint64_t total_weight;
  uint64_t parts_weight;
};

Timing DrawTiming(ThreadState& self) {
  if (self.events_clocked < kClockedFirst) {
    ++self.events_clocked;
    return Timing{1, 1};
  }
  self.timing_draw = self.timing_draw * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's MMIX LCG
  const uint64_t draw = self.timing_draw >> 58;  // the top 6 bits: 4 values in 64 for the total, 1 for the parts
  if (draw < 64 / kTimedOneIn) return Timing{kTimedOneIn, 0};
  return Timing{0, draw == 64 / kTimedOneIn ? kPartsOneIn : 0};
}

int32_t Gettid() { return static_cast<int32_t>(syscall(SYS_gettid)); }

// Turns tracing off for good in this process (write error, finished, forked child).
void StopTracing() { g_state.store(kOff, std::memory_order_release); }

// The packet buffer of the open unit: what the recording threads write under g_lock.
ByteBuffer* Out() { return g_output.packets(); }

// After a failed write: the file ends with its last whole packet; one notice says why the trace ends there, so the
// analyzer never mistakes a full disk for a killed process. `scratch` is a sealed unit's buffer, dropped anyway.
// Called with g_io_lock held.
void NoteWriteFailureIoLocked(ByteBuffer* scratch) {
  char message[200];
  snprintf(message, sizeof(message),
           "writing the trace failed after %llu bytes: %s; the events after that were not recorded",
           static_cast<unsigned long long>(g_sink.bytes_written()), strerror(g_sink.failed_errno()));
  scratch->Clear();
  if (WriteNotice(scratch, static_cast<uint32_t>(format::NoticeCode::kWriteFailed), message, NowNs())) {
    g_sink.WriteLast(scratch->data(), scratch->size());
  } else {
    scratch->ClearError();
    g_sink.Close();
  }
}

// Interns the stacks and encodes the events of the sealed units, oldest first, after each unit's packets, and
// writes them. Called with g_io_lock held; by the flush thread, or by a recording thread that must not wait for it
// (a failed allocation, start and exit, every sealed slot taken).
void WriteSealedIoLocked() {
  while (OutputQueue::Unit* unit = g_output.Oldest()) {
    const int64_t start_ns = NowNs();
    ByteBuffer* out = &unit->packets;
    // The stacks, interned here rather than under g_lock on the thread that allocated (hashing and comparing
    // cached stacks that the program's own work has pushed out of the caches); the nodes they add go before the
    // events that name them.
    for (size_t i = 0; i < unit->event_count; ++i) {
      EventRecord& ev = unit->events[i];
      if (ev.stack == 0) continue;
      const uint64_t* kept = &unit->stacks[ev.stack - 1];
      ev.stack = g_stacks.Intern(reinterpret_cast<const uintptr_t*>(kept + 1), static_cast<int>(kept[0]));
    }
    if (g_stacks.first_pending() < g_stacks.next_id()) {
      if (WriteStackNodes(out, g_stacks, g_stacks.first_pending(), g_stacks.next_id())) {
        g_stacks.MarkWritten();
      } else {
        out->ClearError();
      }
    }
    if (unit->event_count > 0) {
      if (WriteEventBatch(out, unit->events, unit->event_count, unit->complete_below)) {
        g_events += unit->event_count;
      } else {
        out->ClearError();
        g_dropped.fetch_add(unit->event_count, std::memory_order_relaxed);
      }
    }
    if (out->size() > 0 && !g_sink.Write(out->data(), out->size())) {
      StopTracing();
      if (g_sink.failed()) NoteWriteFailureIoLocked(out);
    }
    ++g_flushes;
    g_writer_ns += static_cast<uint64_t>(NowNs() - start_ns);
    g_output.Pop();
  }
}

// Writes pending table entries (strings before the Python frames that name them; Python frames before the stack
// nodes that name them, which the writer adds) into the open unit and seals it, for the flush thread to write.
// Called with g_lock held. When every sealed slot is taken (no flush thread, or a disk slower than the program),
// writes them first itself.
void SealLocked() {
  if (!g_strings.WritePending(Out())) Out()->ClearError();
  if (g_python_frames.HasPending() && !g_python_frames.WritePending(Out())) Out()->ClearError();
  // Under g_lock, after the batch's last append: the reader may release every event numbered below the mark.
  if (g_output.Seal(CompleteBelow())) return;
  ++g_stalled_seals;
  pthread_mutex_lock(&g_io_lock);
  WriteSealedIoLocked();
  pthread_mutex_unlock(&g_io_lock);
  g_output.Seal(CompleteBelow());  // a slot is free now
}

// Seals the open unit and writes everything sealed, on this thread, before returning. Called with g_lock held.
void FlushNowLocked() {
  SealLocked();
  pthread_mutex_lock(&g_io_lock);
  WriteSealedIoLocked();
  pthread_mutex_unlock(&g_io_lock);
}

// Writes Module packets for modules not written yet. Called with g_lock held.
void WriteNewModulesLocked() {
  for (size_t i = 0; i < g_modules.size(); ++i) {
    ModuleEntry& m = g_modules.at(i);
    if (m.written) continue;
    if (WriteModule(Out(), m)) m.written = true; else Out()->ClearError();
  }
}

// Rescans loaded modules (outside g_lock: dl_iterate_phdr takes the loader's lock) and writes new ones. Returns
// how many were added.
size_t RefreshModules() {
  pthread_mutex_lock(&g_module_lock);
  size_t added = g_modules.Scan();
  if (added > 0 || g_modules_unwritten) {
    g_modules_unwritten = false;
    pthread_mutex_lock(&g_lock);
    WriteNewModulesLocked();
    pthread_mutex_unlock(&g_lock);
  }
  pthread_mutex_unlock(&g_module_lock);
  return added;
}

// Says once in the trace why stacks have no Python frames although Python runs. Called with g_lock held.
void NotePythonSupportLocked(PythonSupport support, const char* message) {
  if (g_python_notice_written) return;
  if (support != PythonSupport::kUnsupported && support != PythonSupport::kLayoutMismatch) return;
  format::NoticeCode code = support == PythonSupport::kUnsupported ? format::NoticeCode::kPythonUnsupported
                                                                   : format::NoticeCode::kPythonLayoutMismatch;
  if (WriteNotice(Out(), static_cast<uint32_t>(code), message, NowNs())) {
    g_python_notice_written = true;
  } else {
    Out()->ClearError();
  }
}

// Python may be loaded after tracing started (a program that embeds it): look again when modules were added. Runs
// on the flush thread, which holds no lock of the recorder (the lookup takes the loader's lock).
void RetryPythonLookup() {
  if (!g_config.python_frames || PythonFramesSupport() != PythonSupport::kAbsent) return;
  PythonSupport support = InitPythonFrames(true);
  pthread_mutex_lock(&g_lock);
  NotePythonSupportLocked(support, PythonSupportMessage());
  pthread_mutex_unlock(&g_lock);
}

// Native frames of a PyTorch block allocation made from Python: never more than the depth of every other stack.
int TorchStackDepth() {
  return g_config.torch_stack_depth < g_config.stack_depth ? g_config.torch_stack_depth : g_config.stack_depth;
}

// The stack an event carries: native frames with the thread's Python frames spliced in where the interpreter ran
// them; a marker frame when Python runs but this thread has none. Returns the frame count. Called with g_lock held
// (interning), after the native and Python stacks were taken outside it.
int ComposeStackLocked(uint32_t thread, const uintptr_t* native, int native_count, PythonCapture capture,
                       const RawPythonStack& py, uintptr_t* out, int max_out) {
  if (capture == PythonCapture::kOff) {
    for (int i = 0; i < native_count; ++i) out[i] = native[i];
    return native_count;
  }
  uint64_t python[kMaxPythonFrames];
  uint16_t group_end[kMaxPythonFrames + 1];
  int count = 0, groups = 0;
  if (capture == PythonCapture::kBroken) {
    ++g_python_failures;
    if (!g_python_broken_notice_written) {
      g_python_broken_notice_written =
          WriteNotice(Out(), static_cast<uint32_t>(format::NoticeCode::kPythonLayoutMismatch),
                      "a Python frame chain did not validate (an object of an unexpected type): those stacks keep "
                      "the Python frames read before the break", NowNs());
      if (!g_python_broken_notice_written) Out()->ClearError();
    }
  }
  if (capture == PythonCapture::kOk || capture == PythonCapture::kBroken) {
    uint64_t ids[kMaxPythonFrames];
    g_python_frames.InternStack(thread, py, &g_strings, ids);
    // Interning may fail (out of memory): such a frame is left out, and its group shrinks with it.
    for (int g = 0; g < py.group_count; ++g) {
      for (int i = g == 0 ? 0 : py.group_end[g - 1]; i < py.group_end[g]; ++i) {
        if (ids[i] != 0) python[count++] = format::PcOfPythonFrameId(ids[i]);
      }
      group_end[groups++] = static_cast<uint16_t>(count);
    }
  }
  if (count == 0) {  // no Python thread state, or no frames: say so in the outermost frame
    int n = native_count < max_out - 1 ? native_count : max_out - 1;
    for (int i = 0; i < n; ++i) out[i] = native[i];
    out[n] = format::PcOfPythonFrameId(format::kNoPythonFramesId);
    return n + 1;
  }
  ++g_python_stacks;
  bool is_eval[kMaxStackDepth];
  for (int i = 0; i < native_count; ++i) is_eval[i] = IsEvalLoopPc(native[i]);
  SpliceInput in{native, is_eval, native_count, python, group_end, groups};
  bool matched = false;
  return SplicePythonFrames(in, reinterpret_cast<uint64_t*>(out), max_out, &matched);
}

// CLOCK_REALTIME (pthread_cond_timedwait's clock) one flush period from now.
timespec NextFlushDeadline() {
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  int64_t ns = deadline.tv_nsec + static_cast<int64_t>(g_config.flush_ms) * 1000000;
  deadline.tv_sec += ns / 1000000000;
  deadline.tv_nsec = ns % 1000000000;
  return deadline;
}

// Writes each unit a recording thread seals, as soon as it is sealed, and every CUMEMTRACE_FLUSH_MS seals and writes
// what the recording threads left in the open unit (so a killed process loses at most that much), after looking
// for newly loaded modules.
void* FlusherMain(void*) {
  Self().in_recorder = 1;
  prctl(PR_SET_NAME, "cumemtrace");
  RetryPythonLookup();  // for a Python loaded between this library's constructor and the start of tracing
  pthread_mutex_lock(&g_lock);
  timespec deadline = NextFlushDeadline();
  while (!g_stop_flusher) {
    int wait = 0;
    while (!g_stop_flusher && !g_output.HasSealed() && wait != ETIMEDOUT) {
      wait = pthread_cond_timedwait(&g_flusher_wake, &g_lock, &deadline);
    }
    if (g_stop_flusher || g_state.load(std::memory_order_acquire) != kRunning) break;
    if (wait == ETIMEDOUT) {
      pthread_mutex_unlock(&g_lock);
      if (RefreshModules() > 0) RetryPythonLookup();
      pthread_mutex_lock(&g_lock);
      if (g_state.load(std::memory_order_acquire) != kRunning) break;
      SealLocked();
      deadline = NextFlushDeadline();
    }
    pthread_mutex_unlock(&g_lock);
    pthread_mutex_lock(&g_io_lock);
    WriteSealedIoLocked();
    pthread_mutex_unlock(&g_io_lock);
    pthread_mutex_lock(&g_lock);
  }
  pthread_mutex_unlock(&g_lock);
  return nullptr;
}

void StartFlusher() {
  // The flusher must not take the program's signals.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  if (pthread_create(&thread, &attr, FlusherMain, nullptr) != 0) {
    Warn("cannot start the flush thread; events reach the file only when a batch fills and at exit");
  }
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

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

// Writes the ranges opened before tracing started, each after a Thread packet for its thread. Called with g_lock
// held, right after the header.
void WritePendingPhasesLocked() {
  for (size_t i = 0; i < g_pending_phases.size(); ++i) {
    const PendingPhase& p = g_pending_phases.at(i);
    if (!WriteThread(Out(), p.thread, p.tid, p.thread_name)) Out()->ClearError();
    PhaseRecord r{0, p.time_ns, p.thread, p.kind, p.name, p.name_size, p.range_id, p.domain};
    if (!WritePhase(Out(), r)) Out()->ClearError();
  }
  g_pending_phases.Clear();
}

void WriteHeaderLocked() {
  static char cmdline[16384];
  static const char* argv[256];
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
  h.start_time_ns = g_start_ns;
  h.start_unix_time_ns = static_cast<int64_t>(wall.tv_sec) * 1000000000 + wall.tv_nsec;
  DriverVersion(&h.driver_version);
  h.stack_depth = static_cast<uint32_t>(g_config.stack_depth);
  h.torch_stack_depth = static_cast<uint32_t>(TorchStackDepth());
  h.rank = g_config.rank;
  h.local_rank = g_config.local_rank;
  h.world_size = g_config.world_size;
  h.forked_child = g_forked_child;
  h.cupti_enabled = g_cupti_enabled;
  h.python_frames_enabled = g_config.python_frames;
  if (!WriteHeader(Out(), h)) Out()->ClearError();
}

// CUMEMTRACE_CUPTI=1: subscribes once per process; a forked child keeps its parent's subscription (or failure) and
// does not warn again. Called under g_start_lock, before the header (which says whether it worked).
void StartCuptiOnce() {
  if (!g_config.cupti) return;
  if (!g_cupti_tried) {
    g_cupti_tried = true;
    g_cupti_enabled = StartCupti(g_cupti_failure, sizeof(g_cupti_failure));
    if (!g_cupti_enabled) Warn("CUPTI unavailable (%s); tracing goes on with interposition only", g_cupti_failure);
  }
}

void Start() {
  pthread_mutex_lock(&g_start_lock);
  if (g_state.load(std::memory_order_acquire) != kUninitialized) {
    pthread_mutex_unlock(&g_start_lock);
    return;
  }
  g_state.store(kStarting, std::memory_order_release);
  if (g_forked_before_start) {
    // Forked before the parent's first event: the parent is the process that traces, whoever calls CUDA first. This
    // child traces only with follow-fork, under a name of its own; it never takes the parent's file.
    g_forked_before_start = false;
    ReadConfig(&g_config);
    if (!g_config.follow_fork) {
      StopTracing();
      pthread_mutex_unlock(&g_start_lock);
      return;
    }
    g_forked_child = true;
  }
  bool path_ok = true;
  if (!g_forked_child) {
    ReadConfig(&g_config);
  } else {
    // The parent's configuration stands; only the file is the child's own.
    path_ok = ForkedChildOutputPath(g_config.output_pattern, getpid(), g_config.host, g_config.rank_text,
                                    g_config.output_path, sizeof(g_config.output_path));
    if (!path_ok) Warn("no room for the forked child's pid in the trace path; not tracing process %d", getpid());
  }
  bool ok = path_ok && !g_config.disabled && g_output.Init(1 << 20) &&
            g_sink.Open(g_config.output_path, g_config.overwrite);
  if (!ok) {
    StopTracing();
    pthread_mutex_unlock(&g_start_lock);
    return;
  }
  g_start_ns = NowNs();
  g_sampler.Reset(static_cast<int64_t>(g_config.sample_ms) * 1000000);
  InitNativeStacks();
  StartCuptiOnce();
  pthread_mutex_lock(&g_lock);
  WriteHeaderLocked();
  WritePendingPhasesLocked();
  NotePythonSupportLocked(PythonFramesSupport(), PythonSupportMessage());
  if (g_config.cupti && !g_cupti_enabled) {
    char message[320];
    size_t n = strlen(g_cupti_failure);
    memcpy(message, "CUPTI unavailable: ", 19);
    if (n > sizeof(message) - 20) n = sizeof(message) - 20;
    memcpy(message + 19, g_cupti_failure, n);
    message[19 + n] = '\0';
    if (!WriteNotice(Out(), static_cast<uint32_t>(format::NoticeCode::kCuptiUnavailable), message, g_start_ns)) {
      Out()->ClearError();
    }
  }
  // Written now, on this thread: a trace file that exists always starts with its header, even in a forked child
  // that ends with _exit before its flush thread wrote anything. The one write of the header the program waits for.
  FlushNowLocked();
  pthread_mutex_unlock(&g_lock);
  RefreshModules();
  // Running before the flush thread starts: it leaves at any other state.
  g_state.store(kRunning, std::memory_order_release);
  StartFlusher();
  pthread_mutex_unlock(&g_start_lock);
}

// Registers the calling thread (and writes its Thread packet) if needed. Called with g_lock held.
void EnsureThreadLocked(ThreadState& self, const char* name) {
  if (self.thread_index != 0 && !self.name_changed) return;
  if (self.thread_index == 0) self.thread_index = g_next_thread_index++;
  self.name_changed = false;
  if (!WriteThread(Out(), self.thread_index, Gettid(), name)) Out()->ClearError();
}

// Describes a device the first time an event names it. Queries the driver outside g_lock.
void EnsureDevice(int32_t device) {
  if (device < -1 || device >= kMaxDevices) return;
  if (__atomic_load_n(&g_device_written[device + 1], __ATOMIC_ACQUIRE)) return;
  DeviceRecord record{};
  record.ordinal = device;
  DeviceDescription description;
  if (device >= 0 && DescribeDevice(device, &description)) {
    record.name = description.name;
    record.uuid = description.has_uuid ? description.uuid : nullptr;
    record.uuid_size = description.has_uuid ? sizeof(description.uuid) : 0;
    record.total_memory = description.total_memory;
  } else {
    record.name = device < 0 ? "host" : "";
  }
  DriverVersion(&record.driver_version);
  pthread_mutex_lock(&g_lock);
  if (!g_device_written[device + 1]) {
    if (WriteDevice(Out(), record)) {
      __atomic_store_n(&g_device_written[device + 1], true, __ATOMIC_RELEASE);
    } else {
      Out()->ClearError();
    }
  }
  pthread_mutex_unlock(&g_lock);
}

void AtForkPrepare() {
  pthread_mutex_lock(&g_start_lock);
  pthread_mutex_lock(&g_module_lock);
  pthread_mutex_lock(&g_lock);
  pthread_mutex_lock(&g_io_lock);  // a write in progress ends first: the child copies no half-written unit
}

void AtForkParent() {
  pthread_mutex_unlock(&g_io_lock);
  pthread_mutex_unlock(&g_lock);
  pthread_mutex_unlock(&g_module_lock);
  pthread_mutex_unlock(&g_start_lock);
}

// Makes the forked child's state that of a process that has not traced yet, keeping the configuration, the module
// map (the child has the same mappings) and the CUPTI subscription. Called in the child with every lock held.
void ResetForForkedChildLocked() {
  g_sink = Sink();  // the parent's descriptor is already closed; its byte count is not the child's
  g_stacks.Reset();
  for (size_t i = 0; i < g_modules.size(); ++i) g_modules.at(i).written = false;
  g_modules_unwritten = true;
  for (bool& written : g_device_written) __atomic_store_n(&written, false, __ATOMIC_RELAXED);
  g_next_thread_index = 1;
  Self().thread_index = 0;  // the forking thread is the child's only thread
  Self().name_changed = false;
  g_stop_flusher = false;  // the parent's flush thread does not exist here; Start() makes the child's own
  pthread_cond_t fresh = PTHREAD_COND_INITIALIZER;
  g_flusher_wake = fresh;
  g_events = g_unwind_failures = g_truncated_stacks = g_dropped_frames = g_recorder_ns = g_flushes = 0;
  g_writer_ns = g_stalled_seals = 0;
  g_recorder_python_ns = g_recorder_unwind_ns = g_recorder_lock_wait_ns = g_recorder_stack_ns = 0;
  g_memory_samples = g_cupti_only_events = 0;
  g_allocator_events = g_allocator_ignored = 0;
  g_notices_written = 0;
  g_dropped.store(0, std::memory_order_relaxed);
  g_strings.Reset();  // string and Python frame ids start again in the child's trace
  g_python_frames.Reset();
  g_python_stacks = g_python_failures = 0;
  g_python_notice_written = g_python_broken_notice_written = false;
  ResetPendingAfterFork();  // the parent's other threads, and the numbers they held, are not in the child
}

// The child shares the parent's file: it must never write to it, and the bytes buffered at the fork belong to the
// parent, which writes them. By default the child stops tracing (a DataLoader worker ends with os._exit, so
// nothing at exit would run anyway). With CUMEMTRACE_FOLLOW_FORK=1 a child of a tracing parent starts a trace of
// its own at its first event: a new file, a header with forked_child, fresh tables and a flush thread of its own.
void AtForkChild() {
  int state = g_state.load(std::memory_order_acquire);
  g_sink.Abandon();
  g_output.Clear();
  g_pending_phases.Clear();  // the parent's open ranges are the parent's
  if (state == kRunning && g_config.follow_fork) {
    ResetForForkedChildLocked();
    g_forked_child = true;
    g_state.store(kUninitialized, std::memory_order_release);
  } else if (state != kUninitialized) {
    StopTracing();
  } else {
    g_forked_before_start = true;  // Start() decides, at the child's first event (follow-fork or not)
  }
  pthread_mutex_unlock(&g_io_lock);
  pthread_mutex_unlock(&g_lock);
  pthread_mutex_unlock(&g_module_lock);
  pthread_mutex_unlock(&g_start_lock);
}

void FinishTrace() {
  if (g_state.load(std::memory_order_acquire) != kRunning) return;
  ThreadState& self = Self();
  ++self.in_recorder;
  RefreshModules();
  RetryPythonLookup();  // a Python loaded since the last flush still gets its notice
  NoteTorchTrackerAtEnd(g_config.torch_blocks);
  pthread_mutex_lock(&g_lock);
  if (g_state.load(std::memory_order_acquire) == kRunning) {
    g_stop_flusher = true;
    pthread_cond_signal(&g_flusher_wake);
    StopTracing();  // events from destructors that run after this one are not recorded
    FlushNowLocked();
    pthread_mutex_lock(&g_io_lock);  // g_stacks is the writer's
    WriteSymbolTable(Out(), g_stacks, g_modules, &g_strings);
    pthread_mutex_unlock(&g_io_lock);
    FlushNowLocked();
    // The queue is empty and stays so (g_lock is held): the trailer goes straight to the sink, with the counters
    // of every unit written.
    pthread_mutex_lock(&g_io_lock);
    TrailerRecord t{};
    t.events = g_events;
    t.dropped_events = g_dropped.load(std::memory_order_relaxed);
    t.unwind_failures = g_unwind_failures;
    t.truncated_stacks = g_truncated_stacks;
    t.dropped_frames = g_dropped_frames;
    t.bytes_written = g_sink.bytes_written();
    t.stack_nodes = g_stacks.node_count();
    t.wrapper_slots_exhausted = g_wrapper_slots_exhausted.load(std::memory_order_relaxed);
    t.end_time_ns = NowNs();
    t.recorder_time_ns = g_recorder_ns;
    t.recorder_python_ns = g_recorder_python_ns;
    t.recorder_unwind_ns = g_recorder_unwind_ns;
    t.recorder_lock_wait_ns = g_recorder_lock_wait_ns;
    t.recorder_stack_ns = g_recorder_stack_ns;
    t.flushes = g_flushes;
    t.writer_time_ns = g_writer_ns;
    t.stalled_seals = g_stalled_seals;
    t.python_stacks = g_python_stacks;
    t.python_failures = g_python_failures;
    t.memory_samples = g_memory_samples;
    t.cupti_only_events = g_cupti_only_events;
    t.allocator_events = g_allocator_events;
    t.allocator_ignored = g_allocator_ignored;
    if (WriteTrailer(Out(), t) && !g_sink.Write(Out()->data(), Out()->size()) && g_sink.failed()) {
      NoteWriteFailureIoLocked(Out());  // as for any other packet: the file says why it has no trailer
    }
    Out()->Clear();
    g_sink.Close();
    if (!g_config.quiet && g_events > 0) {  // say where the trace went; a process that traced nothing stays silent
      char line[1024];
      FormatWroteLine(g_config.output_path, g_events, g_sink.bytes_written(), line, sizeof(line));
      Warn("%s", line);
    }
    pthread_mutex_unlock(&g_io_lock);
  }
  pthread_mutex_unlock(&g_lock);
  --self.in_recorder;
}

// Exec'd children: the first process that loads the preload records its pid in CUMEMTRACE_ROOT_PID (children
// inherit it); a process that finds another pid there stays passive (hooks only forward) unless
// CUMEMTRACE_FOLLOW_EXEC=1. A root process that execs keeps its pid and goes on tracing in the new image.
void DecideRootOrPassive() {
  char pid_text[24];
  FormatDecimal(getpid(), pid_text, sizeof(pid_text));
  const char* root = getenv("CUMEMTRACE_ROOT_PID");
  const char* follow = getenv("CUMEMTRACE_FOLLOW_EXEC");
  if (root == nullptr || root[0] == '\0') {
    setenv("CUMEMTRACE_ROOT_PID", pid_text, 1);
  } else if (strcmp(root, pid_text) != 0 && (follow == nullptr || strcmp(follow, "1") != 0)) {
    g_state.store(kOff, std::memory_order_release);
  }
}

__attribute__((constructor)) void OnLoad() {
  int saved_errno = errno;
  pthread_atfork(AtForkPrepare, AtForkParent, AtForkChild);
  DecideRootOrPassive();
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

ThreadState& Self() { return t_self; }

bool Tracing() {
  int state = g_state.load(std::memory_order_acquire);
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
  return g_state.load(std::memory_order_acquire) == kRunning;
}

bool TracingStarted() {
  return g_state.load(std::memory_order_acquire) == kRunning && Self().in_recorder == 0;
}

uint64_t TakeSequence() { return TakePendingSequence(); }

void ReleaseSequence(uint64_t seq) { SequenceDone(seq); }

void NoteThreadRenamed() { Self().name_changed = true; }

void NoteWrapperSlotsExhausted() { g_wrapper_slots_exhausted.fetch_add(1, std::memory_order_relaxed); }

bool FindLoadedModule(const char* file_name_prefix, size_t* next_index, ModuleEntry* out) {
  if (pthread_mutex_trylock(&g_module_lock) != 0) return false;
  size_t prefix_length = strlen(file_name_prefix);
  bool found = false;
  size_t i = *next_index;
  for (; i < g_modules.size(); ++i) {
    const ModuleEntry& m = g_modules.at(i);
    const char* slash = strrchr(m.path, '/');
    if (strncmp(slash != nullptr ? slash + 1 : m.path, file_name_prefix, prefix_length) == 0) {
      *out = m;
      found = true;
      break;
    }
  }
  *next_index = i;
  pthread_mutex_unlock(&g_module_lock);
  return found;
}

void NoteOnce(format::NoticeCode code, const char* message) {
  uint32_t bit = 1u << (static_cast<uint32_t>(code) & 31);
  pthread_mutex_lock(&g_lock);
  if (g_state.load(std::memory_order_acquire) == kRunning && (g_notices_written & bit) == 0) {
    if (WriteNotice(Out(), static_cast<uint32_t>(code), message, NowNs())) {
      g_notices_written |= bit;
    } else {
      Out()->ClearError();
    }
  }
  pthread_mutex_unlock(&g_lock);
}

void NoteAllocatorAttached(const AllocatorAttachRecord& attach) {
  pthread_mutex_lock(&g_lock);
  if (g_state.load(std::memory_order_acquire) == kRunning && !WriteAllocatorAttach(Out(), attach)) {
    Out()->ClearError();
  }
  pthread_mutex_unlock(&g_lock);
}

void NoteAllocatorIgnored() {
  pthread_mutex_lock(&g_lock);
  ++g_allocator_ignored;
  pthread_mutex_unlock(&g_lock);
}

void RecordPhase(uint32_t kind, const char* name, size_t name_size, uint64_t range_id, uint32_t domain) {
  ThreadState& self = Self();
  if (self.in_recorder != 0) return;
  int state = g_state.load(std::memory_order_acquire);
  if (state == kOff) return;
  ++self.in_recorder;
  int saved_errno = errno;
  const int64_t now = NowNs();
  char thread_name[16] = "";
  if (self.thread_index == 0 || self.name_changed) prctl(PR_GET_NAME, thread_name);
  // Before tracing runs, wait for a Start() in progress (it holds g_start_lock throughout): a range is then either
  // kept here before Start() writes the pending ones, or written after it.
  const bool before_start = state != kRunning;
  if (before_start) pthread_mutex_lock(&g_start_lock);
  pthread_mutex_lock(&g_lock);
  state = g_state.load(std::memory_order_acquire);
  if (state == kRunning) {
    EnsureThreadLocked(self, thread_name);
    PhaseRecord r{LastSequence(), now, self.thread_index, kind, name, name_size,
                  range_id, domain};
    if (!WritePhase(Out(), r)) Out()->ClearError();
  } else if (state == kUninitialized) {
    if (self.thread_index == 0) {
      self.thread_index = g_next_thread_index++;
      self.name_changed = true;  // its Thread packet: with a pending range at the start, else at its next event
    }
    g_pending_phases.Note(kind, self.thread_index, Gettid(), thread_name, name, name_size, range_id, domain, now);
  }
  pthread_mutex_unlock(&g_lock);
  if (before_start) pthread_mutex_unlock(&g_start_lock);
  errno = saved_errno;
  --self.in_recorder;
}

void Record(const CallRecord& call) {
  ThreadState& self = Self();
  if (self.in_recorder != 0) {
    if (call.seq != 0) SequenceDone(call.seq);
    return;
  }
  ++self.in_recorder;
  int saved_errno = errno;
  int64_t start_ns = NowNs();
  const Timing timing = DrawTiming(self);
  const bool clock_parts = timing.parts_weight != 0;

  EventRecord ev{};
  ev.time_ns = start_ns;
  ev.api = static_cast<uint16_t>(call.api);
  ev.address = call.address;
  ev.size = call.size;
  ev.stream = call.stream;
  ev.aux = call.aux;
  ev.result = call.result;
  ev.cupti_only = call.cupti_only;
  const format::ApiInfo* info = format::FindApi(static_cast<uint32_t>(call.api));
  bool is_alloc = info != nullptr && info->op == format::Op::kAlloc;
  const bool is_torch = format::IsTorchApi(call.api);
  bool device_is_current = false;
  if (call.device_known) {
    ev.device = call.device;
  } else if (is_alloc && CurrentDevice(&ev.device)) {
    self.last_device = ev.device;
    device_is_current = true;
  } else {
    ev.device = self.last_device;  // frees: readers take the device of the allocation freed
  }
  if (is_alloc && call.result != 0) ev.has_mem_info = DriverMemInfo(&ev.free_bytes, &ev.total_bytes);
  EnsureDevice(ev.device);
  // The driver's view of the device (outside the lock: it is a driver call); written after the event's seq below.
  MemorySampleRecord sample{};
  bool sampled = is_alloc && g_sampler.SampleIfDue(ev.device, device_is_current, start_ns, &sample.free_bytes,
                                                   &sample.total_bytes);

  uintptr_t pcs[kMaxStackDepth];
  bool truncated = false;
  uint32_t dropped_frames = 0;
  // Reports use the stacks of allocations (and of failures); a successful free carries none unless asked: the
  // unwind was two thirds of the hook's instructions, and half the events are frees. PyTorch's allocator entries
  // follow the same rule: a block handed out and a failed request carry the stack that asked; the rest none.
  const bool wants_stack = is_torch ? (call.api == format::Api::kTorchAlloc || call.api == format::Api::kTorchOom)
                                    : (is_alloc || call.result != 0 || g_config.free_stacks);
  const int stack_depth = wants_stack ? g_config.stack_depth : 0;
  RawPythonStack python;  // read outside the lock: only this thread's own frames
  const int64_t python_start_ns = clock_parts ? NowNs() : 0;
  PythonCapture python_capture = stack_depth > 0 ? CapturePythonStack(&python) : PythonCapture::kOff;
  const int64_t unwind_start_ns = clock_parts ? NowNs() : 0;
  // A thread with Python frames has the user's lines there (never cut): a deep native stack then keeps only its
  // innermost frames, and the outermost ones (the interpreter's main) are not worth a second, full unwind. Every
  // PyTorch allocation made from Python is such a stack (those of the autograd engine's threads are not).
  const bool keep_outermost = !(python_capture == PythonCapture::kOk && python.group_count > 0);
  // A PyTorch block allocated from Python keeps fewer native frames (TorchStackDepth(), 16 by default): the
  // allocator and the innermost op with its dispatcher entry. Beyond lie the outer ATen ops, the Python binding and
  // the interpreter's own calls between the Python frames, which carry the user's lines. On an H100 GPT-2 step,
  // 64 -> 32 frames took 1533 -> 1363 ns per row (docs/performance.md, run 9), 32 -> 16 1267 -> 1102 (run 12); a cut
  // by design, not counted as truncated (the header says the depth).
  const bool torch_from_python = is_torch && !keep_outermost;
  int depth = CaptureStack(pcs, torch_from_python ? TorchStackDepth() : stack_depth, &truncated, &dropped_frames,
                           keep_outermost);
  if (torch_from_python) truncated = false;
  const int64_t unwind_end_ns = clock_parts ? NowNs() : 0;
  char name[16] = "";
  if (self.thread_index == 0 || self.name_changed) prctl(PR_GET_NAME, name);

  pthread_mutex_lock(&g_lock);
  const int64_t locked_ns = clock_parts ? NowNs() : 0;
  if (g_state.load(std::memory_order_acquire) == kRunning) {
    EnsureThreadLocked(self, name);
    if (depth < 0) {
      ++g_unwind_failures;
      depth = 0;
    }
    if (truncated) ++g_truncated_stacks;
    g_dropped_frames += dropped_frames;
    // Under g_lock: one buffer for all threads keeps the hook's own stack use small on threads with small stacks.
    // (Composing straight into the open unit instead, saving the copy below, measured no fewer instructions: the
    // recorder less stalled writes, bench/torch_instructions.sh, 7152 against 7109 per pair. So it was not kept.)
    static uintptr_t frames[kMaxStackDepth + kMaxPythonFrames + 1];
    int frame_count = ComposeStackLocked(self.thread_index, pcs, depth, python_capture, python, frames,
                                         static_cast<int>(sizeof(frames) / sizeof(frames[0])));
    static_assert(sizeof(uintptr_t) == sizeof(uint64_t), "stacks are kept as 64-bit words");
    ev.stack = g_output.KeepStack(reinterpret_cast<const uint64_t*>(frames), frame_count);
    const int64_t composed_ns = clock_parts ? NowNs() : 0;
    ev.thread = self.thread_index;
    // PyTorch completes most frees inside the same call that requested them: when nothing came between, the
    // request's row becomes one torch.free row (a third fewer rows in a training loop, no sequence number used).
    EventRecord* last = g_output.last_event();
    const bool merged = call.api == format::Api::kTorchFreeCompleted && last != nullptr &&
                        last->api == static_cast<uint16_t>(format::Api::kTorchFreeRequested) &&
                        last->address == ev.address && last->device == ev.device && last->thread == ev.thread &&
                        last->seq == LastSequence();
    if (merged) last->api = static_cast<uint16_t>(format::Api::kTorchFree);
    ev.seq = merged ? last->seq : call.seq != 0 ? call.seq : TakeAppendedSequence();
    if (sampled) {
      sample.time_ns = start_ns;
      sample.device = ev.device;
      sample.after_seq = ev.seq;
      if (WriteMemorySample(Out(), sample)) ++g_memory_samples; else Out()->ClearError();
    }
    if (ev.cupti_only && g_cupti_only_events++ == 0) {
      char message[96] = "first memory call seen only by CUPTI: ";
      size_t used = strlen(message);
      const char* api = info != nullptr ? info->name : "unknown";
      size_t n = strlen(api);
      if (used + n >= sizeof(message)) n = sizeof(message) - 1 - used;
      memcpy(message + used, api, n);
      message[used + n] = '\0';
      if (!WriteNotice(Out(), static_cast<uint32_t>(format::NoticeCode::kCuptiOnlyEvent), message, start_ns)) {
        Out()->ClearError();
      }
    }
    if (is_torch) ++g_allocator_events;
    if (!merged) g_output.Append(ev);
    if (call.result != 0 || call.api == format::Api::kTorchOom) {
      FlushNowLocked();  // a failed allocation often comes right before the process dies: get it to the file now
    } else if (g_output.batch_full()) {
      SealLocked();  // the flush thread encodes and writes it
      pthread_cond_signal(&g_flusher_wake);
    }
    if (timing.total_weight != 0) g_recorder_ns += timing.total_weight * static_cast<uint64_t>(NowNs() - start_ns);
    if (clock_parts) {
      g_recorder_python_ns += timing.parts_weight * static_cast<uint64_t>(unwind_start_ns - python_start_ns);
      g_recorder_unwind_ns += timing.parts_weight * static_cast<uint64_t>(unwind_end_ns - unwind_start_ns);
      g_recorder_lock_wait_ns += timing.parts_weight * static_cast<uint64_t>(locked_ns - unwind_end_ns);
      g_recorder_stack_ns += timing.parts_weight * static_cast<uint64_t>(composed_ns - locked_ns);
    }
  } else {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
  }
  pthread_mutex_unlock(&g_lock);
  if (call.seq != 0) SequenceDone(call.seq);  // appended (or dropped): the mark may pass it

  // Outside every lock of the recorder (it may take PyTorch's allocator locks); still inside the recorder, so no
  // CUDA call it causes is recorded.
  if (is_alloc && !is_torch && call.result == 0 && ev.seq != 0 && g_config.torch_blocks) {
    if (stack_depth == 0 && TorchTrackerMayAttach()) {  // stacks are off: a short one only to see who allocates
      depth = CaptureStack(pcs, kAttachStackDepth, &truncated, &dropped_frames, false);
    }
    if (depth > 0) MaybeAttachTorchTracker(call.api, ev.seq, call.address, call.size, pcs, depth);
  }
  errno = saved_errno;
  --self.in_recorder;
}

}  // namespace cumemtrace::preload
