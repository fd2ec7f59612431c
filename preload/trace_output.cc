// The writer side of the recorder: sealing the open unit, writing sealed units (on the flush thread, or on a
// recording thread that must not wait for it), and the flush thread itself.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "preload/batch_compression.h"
#include "preload/gpu_processes.h"
#include "preload/log.h"
#include "preload/process_tree.h"
#include "preload/recorder.h"
#include "preload/recorder_state.h"
#include "preload/sequence.h"
#include "preload/thread_name_hook.h"
#include "preload/trace_writer.h"

namespace cumemtrace::preload {

// The file ends with its last whole packet; one notice says why the trace ends there, so the analyzer never mistakes
// a full disk for a killed process. `scratch` is a sealed unit's buffer, dropped anyway.
void NoteWriteFailureIoLocked(ByteBuffer* scratch) {
  Sink& sink = g_output.sink;
  char message[200];
  snprintf(message, sizeof(message),
           "writing the trace failed after %llu bytes: %s; the events after that were not recorded",
           static_cast<unsigned long long>(sink.bytes_written()), strerror(sink.failed_errno()));
  scratch->Clear();
  if (WriteNotice(scratch, static_cast<uint32_t>(format::NoticeCode::kWriteFailed), message, NowNs())) {
    sink.WriteLast(scratch->data(), scratch->size());
  } else {
    scratch->ClearError();
    sink.Close();
  }
}

namespace {

constexpr uint64_t kHeaderCopyEvery = uint64_t{1} << 20;

// Events [0, count) of `unit` as one events packet, their times at the trace's resolution.
bool WriteUnitEvents(ByteBuffer* out, const OutputQueue::Unit* unit, size_t count, uint64_t complete_below) {
  return WriteEventBatch(out, unit->events, count, complete_below, g_session.config.time_unit_ns,
                         g_output.header_copy.start_time_ns);
}

// Under a file size limit the unit may not fit: the sink writes only the whole packets that do. So that the events
// batch is not lost whole when only part of it fits (a limit smaller than the first batch), it is encoded again
// with as many of its events, in the order they were appended, as fit. Returns how many events `out` now holds;
// `before_events` is where the batch starts.
size_t FitEventsIoLocked(ByteBuffer* out, size_t before_events, OutputQueue::Unit* unit) {
  const uint64_t room = g_output.sink.Room();
  if (out->size() <= room) return unit->event_count;
  size_t low = 0, high = unit->event_count;  // the largest count that fits is in [low, high)
  while (high - low > 1) {
    const size_t mid = low + (high - low) / 2;
    out->Truncate(before_events);
    // Without the low-water mark: the events left out may lie below it.
    if (WriteUnitEvents(out, unit, mid, 0) && out->size() <= room) {
      low = mid;
    } else {
      out->ClearError();
      high = mid;
    }
  }
  out->Truncate(before_events);
  if (low > 0 && !WriteUnitEvents(out, unit, low, 0)) {
    out->Truncate(before_events);
    out->ClearError();
    low = 0;
  }
  return low;
}

}  // namespace

// Called by the flush thread, or by a recording thread that must not wait for it (a failed allocation, start and
// exit, every sealed slot taken).
void WriteSealedIoLocked() {
  StackTable& stacks = g_output.stacks;
  while (OutputQueue::Unit* unit = g_output.queue.Oldest()) {
    const int64_t start_ns = NowNs();
    ByteBuffer* out = &unit->packets;
    // The stacks, interned here rather than under g_locks.record on the thread that allocated (hashing and
    // comparing cached stacks that the program's own work has pushed out of the caches); the nodes they add go
    // before the events that name them. Events may name one kept copy (KeepStackLocked): a small cache by the
    // copy's place interns it once.
    constexpr size_t kRecent = 64;
    uint64_t recent_kept[kRecent] = {};  // 1 + offset of the copy; 0: empty
    uint64_t recent_id[kRecent];
    for (size_t i = 0; i < unit->event_count; ++i) {
      EventRecord& ev = unit->events[i];
      if (ev.stack == 0) continue;
      const size_t slot = (ev.stack * 0x9e3779b97f4a7c15ull) >> 58;  // 64 slots
      if (recent_kept[slot] == ev.stack) {
        ev.stack = recent_id[slot];
        continue;
      }
      const uint64_t* kept = &unit->stacks[ev.stack - 1];
      recent_kept[slot] = ev.stack;
      ev.stack = stacks.Intern(reinterpret_cast<const uintptr_t*>(kept + 1), static_cast<int>(kept[0]));
      recent_id[slot] = ev.stack;
    }
    if (stacks.first_pending() < stacks.next_id()) {
      if (WriteStackNodes(out, stacks, stacks.first_pending(), stacks.next_id())) {
        stacks.MarkWritten();
      } else {
        out->ClearError();
      }
    }
    if (unit->event_count > 0) {
      const size_t before_events = out->size();
      if (WriteUnitEvents(out, unit, unit->event_count, unit->complete_below)) {
        size_t kept = FitEventsIoLocked(out, before_events, unit);
        if (kept > 0 && !CompressEventBatchIoLocked(out, before_events)) kept = 0;
        g_health.writing.events += kept;
        g_health.dropped.fetch_add(unit->event_count - kept, std::memory_order_relaxed);
      } else {
        out->ClearError();
        g_health.dropped.fetch_add(unit->event_count, std::memory_order_relaxed);
      }
    }
    // What a reader needs of the header, again: at the end of the first unit after the header's, then about every
    // MiB (a damaged header then costs the trace nothing but the header's own fields).
    if (out->size() > 0 && g_output.sink.bytes_written() >= g_output.next_header_copy_at) {
      if (WriteHeaderCopy(out, g_output.header_copy)) {
        g_output.next_header_copy_at = g_output.sink.bytes_written() + out->size() + kHeaderCopyEvery;
      } else {
        out->ClearError();
      }
    }
    if (out->size() > 0 && !g_output.sink.Write(out->data(), out->size())) {
      g_session.Stop();
      if (g_output.sink.failed()) NoteWriteFailureIoLocked(out);
    }
    ++g_health.writing.flushes;
    g_health.writing.writer_ns += static_cast<uint64_t>(NowNs() - start_ns);
    g_output.queue.Pop();
  }
}

// Strings go before the Python frames that name them, Python frames before the stack nodes that name them (which
// the writer adds). When every sealed slot is taken (no flush thread, or a disk slower than the program), writes
// them first itself.
void SealLocked() {
  ByteBuffer* out = g_output.packets();
  if (!g_tables.strings.WritePending(out)) out->ClearError();
  if (g_tables.python_frames.HasPending() && !g_tables.python_frames.WritePending(out)) out->ClearError();
  // Under g_locks.record, after the batch's last append: the reader may release every event numbered below the mark.
  if (g_output.queue.Seal(CompleteBelow())) return;
  ++g_health.recording.stalled_seals;
  pthread_mutex_lock(&g_locks.io);
  WriteSealedIoLocked();
  pthread_mutex_unlock(&g_locks.io);
  g_output.queue.Seal(CompleteBelow());  // a slot is free now
}

void FlushNowLocked() {
  SealLocked();
  pthread_mutex_lock(&g_locks.io);
  WriteSealedIoLocked();
  pthread_mutex_unlock(&g_locks.io);
}

namespace {

// A periodic list of a GPU's processes, placed after the last event numbered so far.
void WriteSampledProcesses(GpuProcessesRecord& record) {
  g_locks.record.Lock();
  if (g_session.running()) {
    record.after_seq = LastSequence();
    if (!WriteGpuProcesses(g_output.packets(), record)) g_output.packets()->ClearError();
  }
  g_locks.record.Unlock();
}

// One flush period from now, on CLOCK_MONOTONIC.
int64_t NextFlushDeadline() { return MonotonicNs() + static_cast<int64_t>(g_session.config.flush_ms) * 1000000; }

// Writes each unit a recording thread seals, as soon as it is sealed, and every CUMEMTRACE_FLUSH_MS seals and writes
// what the recording threads left in the open unit (so a killed process loses at most that much), after looking
// for newly loaded modules.
void* FlusherMain(void*) {
  Self().in_recorder = 1;
  RetryPythonLookup();  // for a Python loaded between this library's constructor and the start of tracing
  LoadBatchCompression();  // here, holding none of the preload's locks: dlopen takes the loader's lock
  g_locks.record.Lock();
  int64_t deadline = NextFlushDeadline();
  while (!g_output.stop_flusher) {
    bool timed_out = false;
    while (!g_output.stop_flusher && !g_output.queue.HasSealed() && !timed_out) {
      const uint32_t seen = g_output.flusher_wake.Count();  // a seal or a stop after this read wakes the wait
      g_locks.record.Unlock();
      timed_out = !g_output.flusher_wake.WaitUntil(seen, deadline);
      g_locks.record.Lock();
    }
    if (g_output.stop_flusher || !g_session.running()) break;
    CalibrateClockLocked();
    if (timed_out) {
      g_locks.record.Unlock();
      RecheckClocksource();
      if (RefreshModules() > 0) RetryPythonLookup();
      SampleGpuProcesses(NowNs(), WriteSampledProcesses);  // NVML is slow: never on the program's threads
      g_locks.record.Lock();
      if (!g_session.running()) break;
      SealLocked();
      deadline = NextFlushDeadline();
    }
    g_locks.record.Unlock();
    pthread_mutex_lock(&g_locks.io);
    WriteSealedIoLocked();
    pthread_mutex_unlock(&g_locks.io);
    g_locks.record.Lock();
  }
  g_locks.record.Unlock();
  return nullptr;
}

}  // namespace

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
  } else {
    // Named before the program's first call returns: the name is how the programs it starts see that this process
    // traces (process_tree.h). The thread runs until the trace is finished, so its handle stays valid here. The
    // real function, found at load: looking it up here, under the recorder's start lock, could deadlock with a
    // thread inside dlopen.
    NameThread(thread, kFlushThreadName);
  }
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace cumemtrace::preload
