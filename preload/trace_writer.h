// Encodes each trace.proto packet the preload writes, framed as field 1 of Trace, into a ByteBuffer. Pure
// functions of their arguments: the recorder decides when, tests/conformance checks what.
#ifndef CUMEMTRACE_PRELOAD_TRACE_WRITER_H_
#define CUMEMTRACE_PRELOAD_TRACE_WRITER_H_

#include <stddef.h>
#include <stdint.h>

#include "preload/byte_buffer.h"
#include "preload/event_record.h"

namespace cumemtrace::preload {

struct HeaderInfo {
  const char* tool_version;
  int32_t pid;
  int32_t ppid;
  const char* const* argv;  // argc entries
  int argc;
  const char* hostname;
  const char* executable;
  int64_t start_time_ns;
  int64_t start_unix_time_ns;
  int32_t driver_version;
  uint32_t stack_depth;
  uint32_t torch_stack_depth;
  // -1 when the launcher did not set RANK / LOCAL_RANK / WORLD_SIZE.
  int32_t rank;
  int32_t local_rank;
  int32_t world_size;
  bool forked_child;
  bool python_frames_enabled;
  bool cupti_enabled;
};

struct DeviceRecord {
  int32_t ordinal;
  const char* name;
  const uint8_t* uuid;
  size_t uuid_size;
  uint64_t total_memory;
  int32_t driver_version;
};

struct TrailerRecord {
  uint64_t events;
  uint64_t dropped_events;
  uint64_t unwind_failures;
  uint64_t truncated_stacks;
  uint64_t bytes_written;
  uint64_t stack_nodes;
  uint64_t wrapper_slots_exhausted;
  int64_t end_time_ns;
  uint64_t recorder_time_ns;
  uint64_t recorder_python_ns;  // parts of recorder_time_ns, estimated the same way
  uint64_t recorder_unwind_ns;
  uint64_t recorder_lock_wait_ns;
  uint64_t recorder_stack_ns;
  uint64_t recorder_prologue_ns;
  uint64_t recorder_append_ns;
  uint64_t flushes;
  uint64_t writer_time_ns;  // encoding and writing sealed units, on any thread
  uint64_t stalled_seals;   // a thread of the program wrote the sealed units itself: every slot was taken
  uint64_t python_stacks;
  uint64_t python_failures;
  uint64_t memory_samples;
  uint64_t cupti_only_events;
  uint64_t dropped_frames;
  uint64_t allocator_events;
  uint64_t allocator_ignored;
  uint64_t clock_calibrations;  // clock.h's ClockHealth
  uint64_t clock_max_error_ns;
  uint64_t clock_steps;
};

// trace.proto's AllocatorAttach: PyTorch's caching allocator was reached (preload/torch_tracker.cc).
struct AllocatorAttachRecord {
  uint64_t after_seq;
  int64_t time_ns;
  const char* library;
  uint32_t devices;
  const char* config;
  bool at_first_segment;
};

struct MemorySampleRecord {
  int64_t time_ns;
  int32_t device;
  uint64_t free_bytes;
  uint64_t total_bytes;
  uint64_t after_seq;
};

// trace.proto's Phase: an NVTX range opened or closed, or a mark (preload/nvtx_injection.cc).
struct PhaseRecord {
  uint64_t after_seq;
  int64_t time_ns;
  uint32_t thread;
  uint32_t kind;            // format::PhaseKind
  const char* name;         // not NUL-terminated: name_size bytes
  size_t name_size;
  uint64_t range_id;
  uint32_t domain;
};

// trace.proto's GpuProcesses: the processes NVML lists on one device (preload/gpu_processes.cc).
struct GpuProcessRecord {
  uint32_t pid;
  uint64_t used_bytes;
  bool used_unknown;
  bool self;
  char command[160];  // NUL-terminated, "" when not read
};
struct GpuProcessesRecord {
  static constexpr int kMaxProcesses = 16;
  int64_t time_ns;
  uint64_t after_seq;
  int32_t device;
  uint32_t reason;  // GpuProcesses.Reason
  uint32_t pids;    // GpuProcesses.Pids
  int count;
  GpuProcessRecord process[kMaxProcesses];
  char error[128];  // NUL-terminated; set when there is no list
};

struct ModuleEntry;
class StackTable;

// Each returns false if the buffer could not grow; the packet is then removed again.
bool WriteHeader(ByteBuffer* out, const HeaderInfo& header);
// trace.proto's Packet.header_copy: what a reader needs of the header (no argv, host name or executable; those
// pointers are not read), at most 127 bytes.
bool WriteHeaderCopy(ByteBuffer* out, const HeaderInfo& header);
bool WriteDevice(ByteBuffer* out, const DeviceRecord& device);
bool WriteThread(ByteBuffer* out, uint32_t index, int32_t tid, const char* name);
bool WriteModule(ByteBuffer* out, const ModuleEntry& module);
// Nodes [first_id, end_id) of `table`.
bool WriteStackNodes(ByteBuffer* out, const StackTable& table, uint64_t first_id, uint64_t end_id);
bool WriteStrings(ByteBuffer* out, uint32_t first_id, const char* const* values, size_t count);
// Symbols for `count` pcs; `files` and `lines` (string ids and lines from debug info) may both be null: the columns
// are then left out.
bool WriteSymbols(ByteBuffer* out, const uint64_t* pcs, const uint32_t* functions, const uint32_t* modules,
                  const uint64_t* offsets, const uint32_t* files, const uint32_t* lines, size_t count);
// Python frames [first_id, first_id + count): string ids of function and file, and the line.
bool WritePythonFrames(ByteBuffer* out, uint32_t first_id, const uint32_t* functions, const uint32_t* files,
                       const uint32_t* lines, size_t count);
bool WriteMemorySample(ByteBuffer* out, const MemorySampleRecord& sample);
// `code` is a format::NoticeCode value.
bool WriteNotice(ByteBuffer* out, uint32_t code, const char* message, int64_t time_ns);
bool WriteAllocatorAttach(ByteBuffer* out, const AllocatorAttachRecord& attach);
bool WritePhase(ByteBuffer* out, const PhaseRecord& phase);
bool WriteGpuProcesses(ByteBuffer* out, const GpuProcessesRecord& list);
// `complete_below`: every event numbered below it is in this batch or an earlier one (0: not known). Times are
// written rounded down to `time_origin_ns` (the trace's start) plus a multiple of `time_unit_ns`
// (CUMEMTRACE_TIME_RESOLUTION).
bool WriteEventBatch(ByteBuffer* out, const EventRecord* events, size_t count, uint64_t complete_below = 0,
                     uint64_t time_unit_ns = 1, int64_t time_origin_ns = 0);
bool WriteTrailer(ByteBuffer* out, const TrailerRecord& trailer);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_TRACE_WRITER_H_
