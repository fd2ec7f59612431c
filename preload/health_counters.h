// The counters a trace's trailer reports about the recording itself (what was lost, cut, or how long it took),
// grouped by what guards them (recorder_locks.h).
#ifndef CUMEMTRACE_PRELOAD_HEALTH_COUNTERS_H_
#define CUMEMTRACE_PRELOAD_HEALTH_COUNTERS_H_

#include <stdint.h>

#include <atomic>

#include "preload/trace_writer.h"

namespace cumemtrace::preload {

struct HealthCounters {
  // Any thread, no lock.
  std::atomic<uint64_t> dropped{0};  // events not recorded: tracing had stopped, or their batch could not be encoded
  std::atomic<uint64_t> wrapper_slots_exhausted{0};

  // Under RecorderLocks::record.
  struct Recording {
    uint64_t unwind_failures = 0;
    uint64_t truncated_stacks = 0;
    uint64_t dropped_frames = 0;  // frames left out of the middle of stacks deeper than the depth
    uint64_t recorder_ns = 0;
    // Parts of recorder_ns, clocked on other events (trailer recorder_*_ns): where the recorder's time goes in a
    // real program, on a machine with no profiler.
    uint64_t python_ns = 0;     // reading the thread's Python frames
    uint64_t unwind_ns = 0;     // the native unwind
    uint64_t lock_wait_ns = 0;  // waiting for RecorderLocks::record
    uint64_t stack_ns = 0;      // Python frame ids, splicing, keeping the stack for the writer
    uint64_t prologue_ns = 0;   // before the stack: what the call is, its device, a due memory sample
    uint64_t append_ns = 0;     // after it, under the lock: the number, the row, sealing (and a stalled write)
    uint64_t stalled_seals = 0;  // a recording thread found every sealed slot taken and wrote them itself
    uint64_t python_stacks = 0;
    uint64_t python_failures = 0;
    uint64_t memory_samples = 0;
    uint64_t cupti_only_events = 0;
    uint64_t allocator_events = 0;
    uint64_t allocator_ignored = 0;
  } recording;

  // Under RecorderLocks::io.
  struct Writing {
    uint64_t events = 0;
    uint64_t flushes = 0;    // units written
    uint64_t writer_ns = 0;  // interning, encoding and writing sealed units, on any thread
  } writing;

  // In a forked child that starts a trace of its own, with every lock held: its trailer counts its own events.
  // Not wrapper_slots_exhausted: the child keeps the parent's wrapper slots, and with them the pointers handed out
  // unwrapped, so that gap in coverage is the child's too.
  void ResetForForkedChild() {
    dropped.store(0, std::memory_order_relaxed);
    recording = Recording();
    writing = Writing();
  }

  // The trailer's counters (the caller adds what the sink, the stack table and the clock know).
  void FillTrailer(TrailerRecord* t) const {
    t->events = writing.events;
    t->dropped_events = dropped.load(std::memory_order_relaxed);
    t->unwind_failures = recording.unwind_failures;
    t->truncated_stacks = recording.truncated_stacks;
    t->dropped_frames = recording.dropped_frames;
    t->wrapper_slots_exhausted = wrapper_slots_exhausted.load(std::memory_order_relaxed);
    t->recorder_time_ns = recording.recorder_ns;
    t->recorder_python_ns = recording.python_ns;
    t->recorder_unwind_ns = recording.unwind_ns;
    t->recorder_lock_wait_ns = recording.lock_wait_ns;
    t->recorder_stack_ns = recording.stack_ns;
    t->recorder_prologue_ns = recording.prologue_ns;
    t->recorder_append_ns = recording.append_ns;
    t->flushes = writing.flushes;
    t->writer_time_ns = writing.writer_ns;
    t->stalled_seals = recording.stalled_seals;
    t->python_stacks = recording.python_stacks;
    t->python_failures = recording.python_failures;
    t->memory_samples = recording.memory_samples;
    t->cupti_only_events = recording.cupti_only_events;
    t->allocator_events = recording.allocator_events;
    t->allocator_ignored = recording.allocator_ignored;
  }
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_HEALTH_COUNTERS_H_
