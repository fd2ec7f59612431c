// The recorder's state, one object per concern, shared by the files that make up the recorder (recorder.cc records
// events, session.cc starts and finishes the trace, trace_output.cc writes it, fork_handlers.cc follows fork()).
// recorder.h is the interface the hooks use; nothing here is for them.
//
// Each object says which lock of g_locks guards it; those locks are taken only in the order recorder_locks.h
// declares them. Every object is constant-initialized (constinit): a hook may run before this library's
// constructors, from another library's.
#ifndef CUMEMTRACE_PRELOAD_RECORDER_STATE_H_
#define CUMEMTRACE_PRELOAD_RECORDER_STATE_H_

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include <atomic>

#include "preload/byte_buffer.h"
#include "preload/clock.h"
#include "preload/config.h"
#include "preload/driver_helpers.h"
#include "preload/health_counters.h"
#include "preload/module_map.h"
#include "preload/output_queue.h"
#include "preload/phase_pending.h"
#include "preload/python_frame_table.h"
#include "preload/python_frames.h"
#include "preload/recorder_locks.h"
#include "preload/sink.h"
#include "preload/stack_table.h"
#include "preload/string_table.h"
#include "preload/trace_writer.h"

namespace cumemtrace::preload {

enum State : int { kUninitialized, kStarting, kRunning, kOff };

// This process's trace: its configuration and where it is in its life.
struct Session {
  std::atomic<int> state{kUninitialized};  // read without a lock; changed under g_locks.start, or to kOff anywhere
  // The rest under g_locks.start; fixed while tracing runs.
  Config config{};
  int64_t start_ns = 0;
  bool forked_child = false;         // this process is a forked child that starts (or started) a trace of its own
  bool forked_before_start = false;  // forked from a process that had not started tracing yet
  bool started_by_other = false;     // CUMEMTRACE_ROOT_PID named another process at load (session.cc)
  bool cupti_tried = false;          // CUMEMTRACE_CUPTI=1: StartCupti ran once in this process (or its parent)
  bool cupti_enabled = false;
  char cupti_failure[256] = "";

  bool running() const { return state.load(std::memory_order_acquire) == kRunning; }
  // Turns tracing off for good in this process (write error, finished, forked child).
  void Stop() { state.store(kOff, std::memory_order_release); }
};

inline constexpr int kMaxDevices = 64;

// What the recording threads write to as they record, under g_locks.record.
struct RecordingTables {
  StringTable strings;  // every string id of the trace
  PythonFrameTable python_frames;
  uint32_t next_thread_index = 1;
  bool device_written[kMaxDevices + 1] = {};  // index ordinal + 1; 0 = host. Also read, acquire, without the lock.
  bool python_notice_written = false;
  bool python_broken_notice_written = false;
  uint32_t notices_written = 0;  // bit per format::NoticeCode written by NoteOnce
  PendingPhases pending_phases;  // NVTX ranges opened before tracing started (under g_locks.start as well)
  MemorySampler sampler;         // lock-free; reset at start
};

// The way to the file. The output queue's open unit is the recording side's (g_locks.record), its sealed units
// the writer's (g_locks.io), as output_queue.h says.
struct TraceOutput {
  OutputQueue queue;
  Sink sink;          // under g_locks.io
  StackTable stacks;  // under g_locks.io: the writer interns the stacks the recording threads kept
  // What a reader needs of the header, repeated so that a damaged header does not lose the trace (trace.proto's
  // Packet.header_copy), and the file size from which the next unit ends with a copy; under g_locks.io, set with
  // the header. The header's own unit carries none.
  HeaderInfo header_copy{};
  uint64_t next_header_copy_at = 1;
  // The flush thread's control, under g_locks.record.
  bool stop_flusher = false;
  WakeSignal flusher_wake;  // signalled under g_locks.record

  // The packet buffer of the open unit: what the recording threads write under g_locks.record.
  ByteBuffer* packets() { return queue.packets(); }
};

// The modules loaded in the process, under g_locks.modules (their Module packets are written under g_locks.record).
struct LoadedModules {
  ModuleMap map;
  bool unwritten = false;  // a forked child's new trace: every known module is written again
  // map.size() as of the last scan, readable without the lock: a lookup that has seen that many modules already
  // has nothing new to look at, and skips the lock (FindLoadedModule runs on every allocation until PyTorch loads).
  std::atomic<size_t> scanned{0};
};

extern RecorderLocks g_locks;
extern Session g_session;
extern RecordingTables g_tables;
extern TraceOutput g_output;
extern LoadedModules g_modules;
extern HealthCounters g_health;

// Native frames of a PyTorch block allocation made from Python: never more than the depth of every other stack.
inline int TorchStackDepth() {
  const Config& c = g_session.config;
  return c.torch_stack_depth < c.stack_depth ? c.torch_stack_depth : c.stack_depth;
}

// ---- trace_output.cc: sealing, writing, the flush thread.
// Writes pending table entries into the open unit and seals it, for the flush thread to write. g_locks.record held.
void SealLocked();
// Seals the open unit and writes everything sealed, on this thread, before returning. g_locks.record held.
void FlushNowLocked();
// Interns, encodes and writes the sealed units, oldest first. g_locks.io held.
void WriteSealedIoLocked();
// After a failed write: ends the file with a notice that says why. g_locks.io held.
void NoteWriteFailureIoLocked(ByteBuffer* scratch);
void StartFlusher();

// ---- recorder.cc: modules and Python, also used at start, by the flush thread and at exit.
// Rescans loaded modules and writes new ones; takes g_locks.modules, then g_locks.record. Returns how many were added.
size_t RefreshModules();
// Python may be loaded after tracing started: looks again. Holds no lock of the recorder when called.
void RetryPythonLookup();
// Says once in the trace why stacks have no Python frames although Python runs. g_locks.record held.
void NotePythonSupportLocked(PythonSupport support, const char* message);

// ---- session.cc: starting tracing.
void Start();

// ---- fork_handlers.cc
void InstallForkHandlers();

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_RECORDER_STATE_H_
