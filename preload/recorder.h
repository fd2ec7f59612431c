// The recorder: the one place that turns a hooked CUDA call into a trace event. Hooks call it after (allocations)
// or around (frees) the real call; it takes the stack outside any lock, then under its lock keeps the stack's
// frames, registers the thread and device, appends the event and seals the batch when it is full. The flush thread
// interns the stacks, encodes and writes the sealed batches, and what is buffered every CUMEMTRACE_FLUSH_MS; the trace is finished (symbols, trailer) at exit. Forked children
// stop tracing cleanly, or with CUMEMTRACE_FOLLOW_FORK=1 start a trace of their own at their first event. Tracing
// starts lazily at the first event, so processes that never allocate CUDA memory leave no file behind. A program
// started below a tracing process stays passive unless CUMEMTRACE_FOLLOW_EXEC=1 (session.cc).
//
// Never: call into Python or take the GIL; allocate from the program's heap on the event path; hold the lock
// while unwinding or calling CUDA; change errno or anything else the program can see.
#ifndef CUMEMTRACE_PRELOAD_RECORDER_H_
#define CUMEMTRACE_PRELOAD_RECORDER_H_

#include <stdint.h>

#include "preload/module_map.h"
#include "preload/trace_writer.h"
#include "proto/format.h"

namespace cumemtrace::preload {

struct CallRecord {
  format::Api api = format::Api::kUnknown;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  uint64_t aux = 0;
  int32_t device = 0;
  bool device_known = false;  // false: the recorder asks the driver for the current device (allocations only)
  int32_t result = 0;
  uint64_t seq = 0;           // 0: assigned when appended (allocations); frees pass TakeSequence()'s value
  bool cupti_only = false;    // seen by CUPTI (cupti_source.cc), missed by interposition
};

// Per-thread state, initial-exec TLS so reading it never allocates or takes a lock.
struct ThreadState {
  int in_recorder;      // >0 while cumemtrace itself runs: CUDA calls made meanwhile (its own, a signal
                        // handler's) are never recorded
  int driver_depth;     // nesting of driver hooks: a driver call made inside another is not a user call
  uint32_t thread_index;
  bool name_changed;
  int32_t last_device;
  // The outermost runtime call in progress (cudaMalloc...), whose name labels the first matching driver event.
  format::Api label;
  format::Op label_op;
  bool label_used;
  uint64_t label_seq;   // for frees: the sequence number taken before the real runtime call
  uint64_t timing_draw;  // this thread's random draws for which events time the recorder (recorder.cc)
  uint32_t events_clocked;  // of this thread's first events, those clocked before the draws start (recorder.cc)
};
ThreadState& Self();

// Counts the calling thread as inside cumemtrace while it lives: a CUDA call this thread makes meanwhile (the
// preload's own, or a signal handler's) is not recorded, so it never waits for a lock this thread holds. Every
// holder of the recorder's lock on a program's thread is counted so before it takes the lock: by this guard, or by
// the count its caller already raised (Record(), Start(), the fork handlers).
class InsideRecorder {
 public:
  InsideRecorder() : self_(Self()) { ++self_.in_recorder; }
  ~InsideRecorder() { --self_.in_recorder; }
  InsideRecorder(const InsideRecorder&) = delete;
  InsideRecorder& operator=(const InsideRecorder&) = delete;

 private:
  ThreadState& self_;
};

// True if events should be recorded now (starts tracing at the first call). False once tracing is off: disabled,
// failed, finished, or in a forked child.
bool Tracing();

// True if tracing is running and the calling thread is not inside cumemtrace; never starts tracing (for callbacks
// that run under another library's lock, where starting, which takes the loader's lock, must not happen).
bool TracingStarted();

// A sequence number for an event whose real call has not happened yet (frees). It stays pending (it holds back the
// batches' low-water mark, sequence.h) until Record() appends it or ReleaseSequence() abandons it, on this thread.
// Each takes the recorder's lock (ReleaseSequence only for a number still pending): never call them holding it.
uint64_t TakeSequence();
void ReleaseSequence(uint64_t seq);

// Records one event. Keeps errno.
void Record(const CallRecord& call);

// The calling thread renamed itself: write its Thread packet again at its next event.
void NoteThreadRenamed();

// Counts a driver pointer that had to be handed out unwrapped (coverage gap, reported in the trailer).
void NoteWrapperSlotsExhausted();

// For preload/torch_tracker.cc. Finds the first loaded module at index >= *next_index whose file name starts with
// `file_name_prefix` and copies it to *out (then *next_index is its index); when there is none, *next_index becomes
// the module count, so the next search only looks at modules loaded since. Never waits: returns false when the
// module map is busy.
bool FindLoadedModule(const char* file_name_prefix, size_t* next_index, ModuleEntry* out);
// Writes a Notice of `code` into the trace, once per code and trace.
void NoteOnce(format::NoticeCode code, const char* message);
// Writes the AllocatorAttach packet.
void NoteAllocatorAttached(const AllocatorAttachRecord& attach);
// Counts a trace entry of PyTorch's allocator that was not written (trailer allocator_ignored).
void NoteAllocatorIgnored();
// For preload/nvtx_injection.cc: writes a Phase packet (`kind` a format::PhaseKind; `name` need not be
// NUL-terminated). Before tracing starts, ranges still open are kept and written when it starts (after_seq 0).
// Keeps errno; never starts tracing.
void RecordPhase(uint32_t kind, const char* name, size_t name_size, uint64_t range_id, uint32_t domain);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_RECORDER_H_
