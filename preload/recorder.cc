#include "preload/recorder.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "preload/byte_buffer.h"
#include "preload/config.h"
#include "preload/driver_helpers.h"
#include "preload/event_record.h"
#include "preload/gpu_processes.h"
#include "preload/module_map.h"
#include "preload/native_stack.h"
#include "preload/output_queue.h"
#include "preload/python_frame_table.h"
#include "preload/python_frames.h"
#include "preload/python_splice.h"
#include "preload/recorder_state.h"
#include "preload/sequence.h"
#include "preload/torch_tracker.h"
#include "preload/trace_writer.h"

namespace cumemtrace::preload {

constinit RecorderLocks g_locks;
constinit Session g_session;
constinit RecordingTables g_tables;
constinit TraceOutput g_output;
constinit LoadedModules g_modules;
constinit HealthCounters g_health;

namespace {

// Native frames taken of a driver allocation when stacks are off, only to see whether PyTorch's caching allocator
// asks for it (frames 3 to 6 of the segment stacks in examples/gpt2_blocks_h100.pb, torch 2.11).
constexpr int kAttachStackDepth = 32;

__thread ThreadState t_self __attribute__((tls_model("initial-exec")));

int32_t Gettid() { return static_cast<int32_t>(syscall(SYS_gettid)); }

// Writes Module packets for modules not written yet. Called with g_locks.record held.
void WriteNewModulesLocked() {
  ByteBuffer* out = g_output.packets();
  for (size_t i = 0; i < g_modules.map.size(); ++i) {
    ModuleEntry& m = g_modules.map.at(i);
    if (m.written) continue;
    if (WriteModule(out, m)) m.written = true; else out->ClearError();
  }
}

// Registers the calling thread (and writes its Thread packet) if needed. Called with g_locks.record held.
void EnsureThreadLocked(ThreadState& self, const char* name) {
  if (self.thread_index != 0 && !self.name_changed) return;
  if (self.thread_index == 0) self.thread_index = g_tables.next_thread_index++;
  self.name_changed = false;
  if (!WriteThread(g_output.packets(), self.thread_index, Gettid(), name)) g_output.packets()->ClearError();
}

// Describes a device the first time an event names it. Queries the driver outside g_locks.record.
void EnsureDevice(int32_t device) {
  if (device < -1 || device >= kMaxDevices) return;
  bool& written = g_tables.device_written[device + 1];
  if (__atomic_load_n(&written, __ATOMIC_ACQUIRE)) return;
  DeviceRecord record{};
  record.ordinal = device;
  DeviceDescription description;
  if (device >= 0 && DescribeDevice(device, &description)) {
    record.name = description.name;
    record.uuid = description.has_uuid ? description.uuid : nullptr;
    if (description.has_uuid) NoteDeviceUuid(device, description.uuid);
    record.uuid_size = description.has_uuid ? sizeof(description.uuid) : 0;
    record.total_memory = description.total_memory;
  } else {
    record.name = device < 0 ? "host" : "";
  }
  DriverVersion(&record.driver_version);
  g_locks.record.Lock();
  if (!written) {
    if (WriteDevice(g_output.packets(), record)) {
      __atomic_store_n(&written, true, __ATOMIC_RELEASE);
    } else {
      g_output.packets()->ClearError();
    }
  }
  g_locks.record.Unlock();
}

// ---- Recording one event, step by step (Record() at the end calls them in order).

// The recorder's own time (trailer recorder_time_ns) is clocked on one event in kTimedOneIn, drawn at random per
// thread, and scaled up: clock reads are a visible part of a traced program's time, and clocking every event would
// spend half of them only on adding this up; a random draw keeps any periodic pattern of the program from biasing
// the sum. Its parts (recorder_*_ns) take six more clock reads (bench/clock_cost.c measures one, some 30 ns): they
// are clocked on another 1 in kPartsOneIn, so that those reads do not inflate the total; they add 6 x 30 / 64, a
// few ns per event on average (at 1 in 16, about ten, for a breakdown that needs far fewer samples). A thread's first
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

// The clock reads of one event: its start always, the boundaries of its parts only on events that clock them.
struct EventClock {
  Timing timing;
  int64_t start_ns;
  int64_t python_start_ns;
  int64_t unwind_start_ns;
  int64_t unwind_end_ns;
  int64_t locked_ns;
  int64_t composed_ns;

  bool clocks_parts() const { return timing.parts_weight != 0; }
  int64_t PartNow() const { return clocks_parts() ? NowNs() : 0; }
};

// What a call is, which decides its device, its stack and when it is flushed.
struct EventKind {
  const format::ApiInfo* info;  // nullptr: an API the table does not know
  bool is_alloc;
  bool is_torch;                // an entry of PyTorch's caching allocator
};

EventKind Classify(const CallRecord& call) {
  const format::ApiInfo* info = format::FindApi(static_cast<uint32_t>(call.api));
  return EventKind{info, info != nullptr && info->op == format::Op::kAlloc, format::IsTorchApi(call.api)};
}

// The event's row as the call describes it; its device, stack, thread and sequence number come later.
void DescribeCall(const CallRecord& call, int64_t time_ns, EventRecord* ev) {
  ev->time_ns = time_ns;
  ev->api = static_cast<uint16_t>(call.api);
  ev->address = call.address;
  ev->size = call.size;
  ev->stream = call.stream;
  ev->aux = call.aux;
  ev->result = call.result;
  ev->cupti_only = call.cupti_only;
}

// Sets the event's device; returns true when it is the thread's current device, just asked of the driver.
bool ResolveDevice(const CallRecord& call, const EventKind& kind, ThreadState& self, EventRecord* ev) {
  if (call.device_known) {
    ev->device = call.device;
    return false;
  }
  if (kind.is_alloc && CurrentDevice(&ev->device)) {
    self.last_device = ev->device;
    return true;
  }
  ev->device = self.last_device;  // frees: readers take the device of the allocation freed
  return false;
}

// The stack an event carries, taken outside the lock: the thread's own Python frames and its native frames.
struct TakenStack {
  int wanted_depth;  // the configured depth, or 0 when this event carries no stack
  RawPythonStack python;
  PythonCapture python_capture;
  uintptr_t pcs[kMaxStackDepth];
  int depth;  // native frames in pcs; < 0: the unwind failed
  bool truncated;
  uint32_t dropped_frames;
  uint64_t* memo_note;  // the unwind memo's note of the entry pcs came from; nullptr when unwound (KeepStackLocked)
};

void TakeStack(const CallRecord& call, const EventKind& kind, EventClock* clock, TakenStack* stack) {
  const Config& config = g_session.config;
  stack->truncated = false;
  stack->dropped_frames = 0;
  stack->memo_note = nullptr;
  // Reports use the stacks of allocations (and of failures); a successful free carries none unless asked: the
  // unwind is the costliest part of the hook, and half the events are frees. PyTorch's allocator entries follow
  // the same rule: a block handed out and a failed request carry the stack that asked; the rest none, except a
  // segment given back (rare: one per cudaFree), whose stack tells torch.cuda.empty_cache() from a request that
  // had to release cache under a memory cap or by garbage collection, which the allocator replay must tell apart.
  const bool wants_stack = kind.is_torch
                               ? (format::IsTorchBlockAlloc(call.api) || call.api == format::Api::kTorchOom ||
                                  call.api == format::Api::kTorchSegmentFree ||
                                  call.api == format::Api::kTorchSegmentUnmap)
                               : (kind.is_alloc || call.result != 0 || config.free_stacks);
  stack->wanted_depth = wants_stack ? config.stack_depth : 0;
  clock->python_start_ns = clock->PartNow();
  stack->python_capture =
      stack->wanted_depth > 0 ? CapturePythonStack(&stack->python) : PythonCapture::kOff;
  clock->unwind_start_ns = clock->PartNow();
  // A thread with Python frames has the user's lines there (never cut): a deep native stack then keeps only its
  // innermost frames, and the outermost ones (the interpreter's main) are not worth a second, full unwind. Every
  // PyTorch allocation made from Python is such a stack (those of the autograd engine's threads are not).
  // (A thread state with no frames, as autograd's engine threads have, still yields one empty group: count frames.)
  const bool keep_outermost = !(stack->python_capture == PythonCapture::kOk && stack->python.count > 0);
  // A PyTorch block allocated from Python keeps fewer native frames (TorchStackDepth(), 16 by default): the
  // allocator and the innermost op with its dispatcher entry. Beyond lie the outer ATen ops, the Python binding and
  // the interpreter's own calls between the Python frames, which carry the user's lines; each frame unwound costs
  // time on every block allocation. A cut by design, not counted as truncated (the header says the depth).
  const bool torch_from_python = kind.is_torch && !keep_outermost;
  stack->depth = CaptureStack(stack->pcs, torch_from_python ? TorchStackDepth() : stack->wanted_depth,
                              &stack->truncated, &stack->dropped_frames, keep_outermost, &stack->memo_note);
  if (torch_from_python) stack->truncated = false;
  clock->unwind_end_ns = clock->PartNow();
}

// Says once in the trace that a Python frame chain did not validate. Called with g_locks.record held.
void NotePythonBrokenLocked() {
  if (g_tables.python_broken_notice_written) return;
  ByteBuffer* out = g_output.packets();
  g_tables.python_broken_notice_written =
      WriteNotice(out, static_cast<uint32_t>(format::NoticeCode::kPythonLayoutMismatch),
                  "a Python frame chain did not validate (an object of an unexpected type): those stacks keep "
                  "the Python frames read before the break", NowNs());
  if (!g_tables.python_broken_notice_written) out->ClearError();
}

// The stack an event carries: native frames with the thread's Python frames spliced in where the interpreter ran
// them; a marker frame when Python runs but this thread has none. Returns the frame count. Called with
// g_locks.record held (interning), after the native and Python stacks were taken outside it.
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
    ++g_health.recording.python_failures;
    NotePythonBrokenLocked();
  }
  if (capture == PythonCapture::kOk || capture == PythonCapture::kBroken) {
    uint64_t ids[kMaxPythonFrames];
    g_tables.python_frames.InternStack(thread, py, &g_tables.strings, ids);
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
  ++g_health.recording.python_stacks;
  bool is_eval[kMaxStackDepth];
  for (int i = 0; i < native_count; ++i) is_eval[i] = IsEvalLoopPc(native[i]);
  SpliceInput in{native, is_eval, native_count, python, group_end, groups};
  bool matched = false;
  return SplicePythonFrames(in, reinterpret_cast<uint64_t*>(out), max_out, &matched);
}

static_assert(sizeof(uintptr_t) == sizeof(uint64_t), "stacks are kept as 64-bit words");

// Composes the stack (ComposeStackLocked) and keeps it in the open unit; returns what the event's `stack` holds.
// Called with g_locks.record held.
uint64_t KeepComposedStackLocked(uint32_t thread, const TakenStack* stack) {
  // Without Python frames to splice in, the native frames are the stack: kept from where they were taken.
  if (stack->python_capture == PythonCapture::kOff) {
    return g_output.queue.KeepStack(reinterpret_cast<const uint64_t*>(stack->pcs), stack->depth);
  }
  // Under the lock: one buffer for all threads keeps the hook's own stack use small on threads with small stacks.
  // (Composing straight into the open unit instead, saving the copy below, executed no fewer instructions, so it
  // was not kept.)
  static uintptr_t frames[kMaxStackDepth + kMaxPythonFrames + 1];
  int frame_count = ComposeStackLocked(thread, stack->pcs, stack->depth, stack->python_capture, stack->python,
                                       frames, static_cast<int>(sizeof(frames) / sizeof(frames[0])));
  return g_output.queue.KeepStack(reinterpret_cast<const uint64_t*>(frames), frame_count);
}

// Counts what the unwind lost, and keeps the composed stack in the open unit for the writer to intern. Returns
// what the event's `stack` holds. Called with g_locks.record held.
uint64_t KeepStackLocked(uint32_t thread, TakenStack* stack) {
  HealthCounters::Recording& health = g_health.recording;
  if (stack->depth < 0) {
    ++health.unwind_failures;
    stack->depth = 0;
  }
  if (stack->truncated) ++health.truncated_stacks;
  health.dropped_frames += stack->dropped_frames;
  // A stack of native frames alone (no Python frames to splice in: every stack of the autograd engine's threads,
  // which allocate half of a training step's tensors, and of programs without Python) that came from the unwind
  // memo is a function of the memo's entry: it is kept once per unit, and later events of the unit name that copy
  // (copying 64 frames twice was most of what such an event spent composing). The note lives in the entry
  // (unwind_memo.h), zeroed whenever the entry is made again.
  const PythonCapture capture = stack->python_capture;
  const bool frames_alone = capture == PythonCapture::kOff || capture == PythonCapture::kNoThreadState ||
                            (capture == PythonCapture::kOk && stack->python.count == 0);
  uint64_t* note = frames_alone ? stack->memo_note : nullptr;
  if (note == nullptr) return KeepComposedStackLocked(thread, stack);
  // The unit that holds the copy, and whether the copy ends in ComposeStackLocked's no-Python marker.
  const uint64_t kept_as = g_output.queue.open_generation() * 2 + (capture == PythonCapture::kOff ? 0 : 1);
  if (note[0] == kept_as) return note[1];
  const uint64_t kept = KeepComposedStackLocked(thread, stack);
  if (kept != 0) {
    note[0] = kept_as;
    note[1] = kept;
  }
  return kept;
}

// The row a completed free (of `address` on `device`, by `thread`) turns into a torch.free row: the last one, if it
// requested that free and nothing came after it; else nullptr. Called with g_locks.record held.
EventRecord* RequestCompletedLocked(uint64_t address, int32_t device, uint32_t thread) {
  EventRecord* last = g_output.queue.last_event();
  const bool requested = last != nullptr && last->api == static_cast<uint16_t>(format::Api::kTorchFreeRequested) &&
                         last->address == address && last->device == device && last->thread == thread &&
                         last->seq == LastSequence();
  return requested ? last : nullptr;
}

// Gives the event its sequence number. PyTorch completes most frees inside the same call that requested them: when
// nothing came between, the request's row becomes one torch.free row (a third fewer rows in a training loop, no
// sequence number used); returns true then, and the event is not appended. Called with g_locks.record held.
// (MergeCompletedFree below takes most of them before they get here.)
bool SequenceOrMergeLocked(const CallRecord& call, EventRecord* ev) {
  EventRecord* last = call.api == format::Api::kTorchFreeCompleted
                          ? RequestCompletedLocked(ev->address, ev->device, ev->thread)
                          : nullptr;
  const bool merged = last != nullptr;
  if (merged) last->api = static_cast<uint16_t>(format::Api::kTorchFree);
  ev->seq = merged ? last->seq : call.seq != 0 ? call.seq : TakeAppendedSequenceLocked();
  return merged;
}

// The driver's view of the device, sampled outside the lock, placed after the event. Called with g_locks.record
// held.
void WriteMemorySampleLocked(const EventRecord& ev, MemorySampleRecord* sample) {
  sample->time_ns = ev.time_ns;
  sample->device = ev.device;
  sample->after_seq = ev.seq;
  if (WriteMemorySample(g_output.packets(), *sample)) {
    ++g_health.recording.memory_samples;
  } else {
    g_output.packets()->ClearError();
  }
}

// Counts an event that only CUPTI saw; the first one gets a notice naming its API. Called with g_locks.record held.
void NoteCuptiOnlyLocked(const EventKind& kind, int64_t time_ns) {
  if (g_health.recording.cupti_only_events++ != 0) return;
  char message[96] = "first memory call seen only by CUPTI: ";
  size_t used = strlen(message);
  const char* api = kind.info != nullptr ? kind.info->name : "unknown";
  size_t n = strlen(api);
  if (used + n >= sizeof(message)) n = sizeof(message) - 1 - used;
  memcpy(message + used, api, n);
  message[used + n] = '\0';
  if (!WriteNotice(g_output.packets(), static_cast<uint32_t>(format::NoticeCode::kCuptiOnlyEvent), message,
                   time_ns)) {
    g_output.packets()->ClearError();
  }
}

// A failed allocation often comes right before the process dies: it goes to the file now. A full batch is sealed
// for the flush thread to encode and write. Called with g_locks.record held.
void FlushOrSealLocked(const CallRecord& call) {
  if (call.result != 0 || call.api == format::Api::kTorchOom) {
    FlushNowLocked();
  } else if (g_output.queue.batch_full()) {
    SealLocked();
    g_output.flusher_wake.Signal();
  }
}

// Adds the event's clocked time, scaled by its weights, to the recorder's. Called with g_locks.record held.
void AddRecorderTimeLocked(const EventClock& clock) {
  HealthCounters::Recording& health = g_health.recording;
  const Timing& timing = clock.timing;
  if (timing.total_weight == 0 && !clock.clocks_parts()) return;
  const int64_t end_ns = NowNs();
  if (timing.total_weight != 0) {
    health.recorder_ns += timing.total_weight * static_cast<uint64_t>(end_ns - clock.start_ns);
  }
  if (clock.clocks_parts()) {
    // Six parts, end to end: together they are the event's whole time, so no part of it goes unnamed.
    const uint64_t w = timing.parts_weight;
    health.prologue_ns += w * static_cast<uint64_t>(clock.python_start_ns - clock.start_ns);
    health.python_ns += w * static_cast<uint64_t>(clock.unwind_start_ns - clock.python_start_ns);
    health.unwind_ns += w * static_cast<uint64_t>(clock.unwind_end_ns - clock.unwind_start_ns);
    health.lock_wait_ns += w * static_cast<uint64_t>(clock.locked_ns - clock.unwind_end_ns);
    health.stack_ns += w * static_cast<uint64_t>(clock.composed_ns - clock.locked_ns);
    health.append_ns += w * static_cast<uint64_t>(end_ns - clock.composed_ns);
  }
}

// Everything an event does while tracing runs, in the open unit. Called with g_locks.record held.
void AppendLocked(const CallRecord& call, const EventKind& kind, ThreadState& self, const char* thread_name,
                  TakenStack* stack, MemorySampleRecord* sample, EventClock* clock, EventRecord* ev) {
  EnsureThreadLocked(self, thread_name);
  ev->stack = KeepStackLocked(self.thread_index, stack);
  clock->composed_ns = clock->PartNow();
  ev->thread = self.thread_index;
  const bool merged = SequenceOrMergeLocked(call, ev);
  if (sample != nullptr) WriteMemorySampleLocked(*ev, sample);
  if (ev->cupti_only) NoteCuptiOnlyLocked(kind, ev->time_ns);
  if (kind.is_torch) ++g_health.recording.allocator_events;
  if (!merged) g_output.queue.Append(*ev);
  FlushOrSealLocked(call);
  AddRecorderTimeLocked(*clock);
}

// A completed free that only relabels the row before it (SequenceOrMergeLocked), done before anything else an
// event costs (its clock, its stack's set-up, the device and thread checks): a training loop completes most of its
// frees inside the call that requested them, so a third of PyTorch's allocator entries end here. Returns false,
// having changed nothing, where the completion needs a row of its own (or the thread must write its Thread packet
// first); Record() then takes it the usual way.
bool MergeCompletedFree(const CallRecord& call, ThreadState& self) {
  if (call.api != format::Api::kTorchFreeCompleted || !call.device_known || self.thread_index == 0 ||
      self.name_changed) {
    return false;
  }
  EventClock clock{};
  clock.timing = DrawTiming(self);
  if (clock.timing.total_weight != 0) clock.start_ns = NowNs();
  InsideRecorder inside;
  g_locks.record.Lock();
  EventRecord* last =
      g_session.running() ? RequestCompletedLocked(call.address, call.device, self.thread_index) : nullptr;
  if (last != nullptr) {
    last->api = static_cast<uint16_t>(format::Api::kTorchFree);
    ++g_health.recording.allocator_events;
    // Its parts are not clocked: nothing of the event's own (stack, Python, composing) happened.
    clock.timing.parts_weight = 0;
    AddRecorderTimeLocked(clock);
  }
  g_locks.record.Unlock();
  return last != nullptr;
}

// After a driver allocation: PyTorch's caching allocator may be asking for its first segment; if so, attach to it
// (torch_tracker.h). Called outside every lock of the recorder (it may take PyTorch's allocator locks); still
// inside the recorder, so no CUDA call it causes is recorded.
void MaybeAttachTorch(const CallRecord& call, const EventKind& kind, const EventRecord& ev, TakenStack* stack) {
  if (!kind.is_alloc || kind.is_torch || call.result != 0 || ev.seq == 0 || !g_session.config.torch_blocks) return;
  if (stack->wanted_depth == 0 && TorchTrackerMayAttach()) {  // stacks are off: a short one only to see who allocates
    stack->depth = CaptureStack(stack->pcs, kAttachStackDepth, &stack->truncated, &stack->dropped_frames, false);
  }
  if (stack->depth > 0) MaybeAttachTorchTracker(call.api, ev.seq, call.address, call.size, stack->pcs, stack->depth);
}

}  // namespace

// ---- Modules and Python: at start, on the flush thread and at exit.

size_t RefreshModules() {
  pthread_mutex_lock(&g_locks.modules);
  size_t added = g_modules.map.Scan();
  g_modules.scanned.store(g_modules.map.size(), std::memory_order_release);
  if (added > 0 || g_modules.unwritten) {
    g_modules.unwritten = false;
    InsideRecorder inside;
    g_locks.record.Lock();
    WriteNewModulesLocked();
    g_locks.record.Unlock();
  }
  pthread_mutex_unlock(&g_locks.modules);
  return added;
}

void NotePythonSupportLocked(PythonSupport support, const char* message) {
  if (g_tables.python_notice_written) return;
  if (support != PythonSupport::kUnsupported && support != PythonSupport::kLayoutMismatch) return;
  format::NoticeCode code = support == PythonSupport::kUnsupported ? format::NoticeCode::kPythonUnsupported
                                                                   : format::NoticeCode::kPythonLayoutMismatch;
  if (WriteNotice(g_output.packets(), static_cast<uint32_t>(code), message, NowNs())) {
    g_tables.python_notice_written = true;
  } else {
    g_output.packets()->ClearError();
  }
}

// Runs on the flush thread or at exit, holding no lock of the recorder (the lookup takes the loader's lock).
void RetryPythonLookup() {
  if (!g_session.config.python_frames || PythonFramesSupport() != PythonSupport::kAbsent) return;
  PythonSupport support = InitPythonFrames(true);
  InsideRecorder inside;
  g_locks.record.Lock();
  NotePythonSupportLocked(support, PythonSupportMessage());
  g_locks.record.Unlock();
}

// ---- recorder.h

ThreadState& Self() { return t_self; }

// The recorder's lock, taken here outside Record(), inside the recorder (InsideRecorder) as everywhere.
uint64_t TakeSequence() {
  InsideRecorder inside;
  g_locks.record.Lock();
  const uint64_t seq = TakePendingSequenceLocked();
  g_locks.record.Unlock();
  return seq;
}

void ReleaseSequence(uint64_t seq) {
  if (!SequencePending(seq)) return;  // appended already (the usual case: a runtime free's number after its event)
  InsideRecorder inside;
  g_locks.record.Lock();
  SequenceDoneLocked(seq);
  g_locks.record.Unlock();
}

void NoteThreadRenamed() { Self().name_changed = true; }

void NoteWrapperSlotsExhausted() { g_health.wrapper_slots_exhausted.fetch_add(1, std::memory_order_relaxed); }

bool FindLoadedModule(const char* file_name_prefix, size_t* next_index, ModuleEntry* out) {
  if (*next_index >= g_modules.scanned.load(std::memory_order_acquire)) return false;  // nothing new since
  if (pthread_mutex_trylock(&g_locks.modules) != 0) return false;
  size_t prefix_length = strlen(file_name_prefix);
  bool found = false;
  size_t i = *next_index;
  for (; i < g_modules.map.size(); ++i) {
    const ModuleEntry& m = g_modules.map.at(i);
    const char* slash = strrchr(m.path, '/');
    if (strncmp(slash != nullptr ? slash + 1 : m.path, file_name_prefix, prefix_length) == 0) {
      *out = m;
      found = true;
      break;
    }
  }
  *next_index = i;
  pthread_mutex_unlock(&g_locks.modules);
  return found;
}

void NoteOnce(format::NoticeCode code, const char* message) {
  uint32_t bit = 1u << (static_cast<uint32_t>(code) & 31);
  InsideRecorder inside;
  g_locks.record.Lock();
  if (g_session.running() && (g_tables.notices_written & bit) == 0) {
    if (WriteNotice(g_output.packets(), static_cast<uint32_t>(code), message, NowNs())) {
      g_tables.notices_written |= bit;
    } else {
      g_output.packets()->ClearError();
    }
  }
  g_locks.record.Unlock();
}

void NoteAllocatorAttached(const AllocatorAttachRecord& attach) {
  InsideRecorder inside;
  g_locks.record.Lock();
  if (g_session.running() && !WriteAllocatorAttach(g_output.packets(), attach)) g_output.packets()->ClearError();
  g_locks.record.Unlock();
}

void NoteAllocatorIgnored() {
  InsideRecorder inside;
  g_locks.record.Lock();
  ++g_health.recording.allocator_ignored;
  g_locks.record.Unlock();
}

void RecordPhase(uint32_t kind, const char* name, size_t name_size, uint64_t range_id, uint32_t domain) {
  ThreadState& self = Self();
  if (self.in_recorder != 0) return;
  int state = g_session.state.load(std::memory_order_acquire);
  if (state == kOff) return;
  ++self.in_recorder;
  int saved_errno = errno;
  const int64_t now = NowNs();
  char thread_name[16] = "";
  if (self.thread_index == 0 || self.name_changed) prctl(PR_GET_NAME, thread_name);
  // Before tracing runs, wait for a Start() in progress (it holds g_locks.start throughout): a range is then either
  // kept here before Start() writes the pending ones, or written after it.
  const bool before_start = state != kRunning;
  if (before_start) pthread_mutex_lock(&g_locks.start);
  g_locks.record.Lock();
  state = g_session.state.load(std::memory_order_acquire);
  if (state == kRunning) {
    EnsureThreadLocked(self, thread_name);
    PhaseRecord r{LastSequence(), now, self.thread_index, kind, name, name_size, range_id, domain};
    if (!WritePhase(g_output.packets(), r)) g_output.packets()->ClearError();
  } else if (state == kUninitialized) {
    if (self.thread_index == 0) {
      self.thread_index = g_tables.next_thread_index++;
      self.name_changed = true;  // its Thread packet: with a pending range at the start, else at its next event
    }
    g_tables.pending_phases.Note(kind, self.thread_index, Gettid(), thread_name, name, name_size, range_id, domain,
                                 now);
  }
  g_locks.record.Unlock();
  if (before_start) pthread_mutex_unlock(&g_locks.start);
  errno = saved_errno;
  --self.in_recorder;
}

// The processes on the failing event's device, placed after it. Only on the failure path, and in a frame of its own:
// the list is 3 KB, which every other event's stack is spared.
__attribute__((noinline)) void WriteProcessesAfterFailure(const EventRecord& ev) {
  GpuProcessesRecord processes;
  ListGpuProcessesAtFailure(ev.device, ev.time_ns, &processes);
  processes.after_seq = ev.seq;
  g_locks.record.Lock();
  if (g_session.running() && !WriteGpuProcesses(g_output.packets(), processes)) g_output.packets()->ClearError();
  g_locks.record.Unlock();
}

// One event: what it is, its device, the driver's view and its stack, outside the lock; appended to the open unit
// under g_locks.record; then, outside every lock again, the attach to PyTorch's allocator (MaybeAttachTorch).
void Record(const CallRecord& call) {
  ThreadState& self = Self();
  if (self.in_recorder != 0) {  // a CUDA call made inside the recorder: cumemtrace's own, or a signal handler's
    // Never with a number taken (the hooks take none inside the recorder), so never holding the lock it would take.
    if (call.seq != 0) ReleaseSequence(call.seq);
    return;
  }
  if (MergeCompletedFree(call, self)) return;
  ++self.in_recorder;
  int saved_errno = errno;
  EventClock clock;
  clock.start_ns = NowNs();
  clock.timing = DrawTiming(self);

  // Outside the lock: what the call is, its device (maybe asked of the driver), the driver's view of the device's
  // memory, the stack, the thread's name.
  const EventKind kind = Classify(call);
  EventRecord ev{};
  DescribeCall(call, clock.start_ns, &ev);
  const bool device_is_current = ResolveDevice(call, kind, self, &ev);
  if (kind.is_alloc && call.result != 0) ev.has_mem_info = DriverMemInfo(&ev.free_bytes, &ev.total_bytes);
  EnsureDevice(ev.device);
  MemorySampleRecord sample{};
  const bool sampled = kind.is_alloc && g_tables.sampler.SampleIfDue(ev.device, device_is_current, clock.start_ns,
                                                                     &sample.free_bytes, &sample.total_bytes);
  TakenStack stack;
  TakeStack(call, kind, &clock, &stack);
  char thread_name[16] = "";
  if (self.thread_index == 0 || self.name_changed) prctl(PR_GET_NAME, thread_name);

  g_locks.record.Lock();
  clock.locked_ns = clock.PartNow();
  if (g_session.running()) {
    AppendLocked(call, kind, self, thread_name, &stack, sampled ? &sample : nullptr, &clock, &ev);
  } else {
    g_health.dropped.fetch_add(1, std::memory_order_relaxed);
  }
  if (call.seq != 0) SequenceDoneLocked(call.seq);  // appended (or dropped): the mark may pass it
  g_locks.record.Unlock();
  // A failed allocation: who else holds the device's memory (NVML), placed right after the failure.
  if (kind.is_alloc && call.result != 0 && !call.cupti_only && GpuProcessesDueAtFailure(ev.device, clock.start_ns)) {
    WriteProcessesAfterFailure(ev);
  }

  MaybeAttachTorch(call, kind, ev, &stack);
  errno = saved_errno;
  --self.in_recorder;
}

}  // namespace cumemtrace::preload
