// fork(): the child shares the parent's file, so it must never write to it, and the bytes buffered at the fork
// belong to the parent, which writes them. By default the child stops tracing (a DataLoader worker ends with
// os._exit, so nothing at exit would run anyway). With CUMEMTRACE_FOLLOW_FORK=1 a child of a tracing parent starts
// a trace of its own at its first event: a new file, a header with forked_child, fresh tables and a flush thread
// of its own.
#include <pthread.h>

#include "preload/batch_compression.h"
#include "preload/gpu_processes.h"
#include "preload/recorder.h"
#include "preload/recorder_state.h"
#include "preload/sequence.h"

namespace cumemtrace::preload {
namespace {

// From prepare to parent or child the forking thread holds every lock of the recorder: it counts as inside the
// recorder (recorder.h, InsideRecorder), so that a CUDA call a signal handler makes then is not recorded.
void AtForkPrepare() {
  ++Self().in_recorder;
  g_locks.LockAll();
}

void AtForkParent() {
  g_locks.UnlockAll();
  --Self().in_recorder;
}

// Makes the forked child's state that of a process that has not traced yet, keeping the configuration, the module
// map (the child has the same mappings) and the CUPTI subscription. Called in the child with every lock held.
void ResetForForkedChildLocked() {
  g_output.sink = Sink();  // the parent's descriptor is already closed; its byte count is not the child's
  g_output.stacks.Reset();
  for (size_t i = 0; i < g_modules.map.size(); ++i) g_modules.map.at(i).written = false;
  g_modules.unwritten = true;
  for (bool& written : g_tables.device_written) __atomic_store_n(&written, false, __ATOMIC_RELAXED);
  g_tables.next_thread_index = 1;
  Self().thread_index = 0;  // the forking thread is the child's only thread
  Self().name_changed = false;
  g_output.stop_flusher = false;  // the parent's flush thread does not exist here; Start() makes the child's own
  g_output.flusher_wake.Reset();
  g_health.ResetForForkedChild();
  ResetClockHealth();
  g_tables.notices_written = 0;
  g_tables.strings.Reset();  // string and Python frame ids start again in the child's trace
  g_tables.python_frames.Reset();
  g_tables.python_notice_written = g_tables.python_broken_notice_written = false;
  ResetPendingAfterFork();  // the parent's other threads, and the numbers they held, are not in the child
  RestartBatchCompression();  // the child's trace must not refer back to the parent's batches
}

void AtForkChild() {
  ResetGpuProcessesInForkedChild();
  int state = g_session.state.load(std::memory_order_acquire);
  g_output.sink.Abandon();
  g_output.queue.Clear();
  g_tables.pending_phases.Clear();  // the parent's open ranges are the parent's
  if (state == kRunning && g_session.config.follow_fork) {
    ResetForForkedChildLocked();
    g_session.forked_child = true;
    g_session.state.store(kUninitialized, std::memory_order_release);
  } else if (state != kUninitialized) {
    g_session.Stop();
  } else {
    g_session.forked_before_start = true;  // Start() decides, at the child's first event (follow-fork or not)
  }
  g_locks.record.ForgetSleepers();  // threads of the parent waiting for it are not in the child
  g_locks.UnlockAll();
  --Self().in_recorder;
}

}  // namespace

void InstallForkHandlers() { pthread_atfork(AtForkPrepare, AtForkParent, AtForkChild); }

}  // namespace cumemtrace::preload
