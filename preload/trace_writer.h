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
  uint64_t flushes;
};

struct ModuleEntry;
class StackTable;

// Each returns false if the buffer could not grow; the packet is then removed again.
bool WriteHeader(ByteBuffer* out, const HeaderInfo& header);
bool WriteDevice(ByteBuffer* out, const DeviceRecord& device);
bool WriteThread(ByteBuffer* out, uint32_t index, int32_t tid, const char* name);
bool WriteModule(ByteBuffer* out, const ModuleEntry& module);
// Nodes [first_id, end_id) of `table`.
bool WriteStackNodes(ByteBuffer* out, const StackTable& table, uint64_t first_id, uint64_t end_id);
bool WriteStrings(ByteBuffer* out, uint32_t first_id, const char* const* values, size_t count);
bool WriteSymbols(ByteBuffer* out, const uint64_t* pcs, const uint32_t* functions, const uint32_t* modules,
                  const uint64_t* offsets, size_t count);
bool WriteEventBatch(ByteBuffer* out, const EventRecord* events, size_t count);
bool WriteTrailer(ByteBuffer* out, const TrailerRecord& trailer);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_TRACE_WRITER_H_
