// The event stream (`cumem-analyze events`): every event in sequence order, one row each, handed to a sink as the
// trace is read (a trace of a billion events must not be held in memory), so it is a pass of its own over the raw
// trace rather than a report over the Analysis. For a free, the kind and size are those of the allocation it
// freed, when the replay knows it. For debugging and for end-to-end tests.
#ifndef CUMEMTRACE_ANALYZER_MODEL_MEMORY_EVENT_STREAM_H_
#define CUMEMTRACE_ANALYZER_MODEL_MEMORY_EVENT_STREAM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "analyzer/model/memory/memory_model.h"
#include "analyzer/model/trace_info.h"

namespace cumemtrace::analyzer {

struct EventRow {
  uint64_t seq = 0;
  int64_t time_ns = 0;  // relative to the start of the trace
  const char* op = "";  // "alloc" or "free"
  const char* api = "";
  const char* kind = "unknown";
  int32_t device = 0;
  uint64_t address = 0;
  bool has_size = false;  // allocations: always; frees: when the freed allocation is known
  uint64_t size = 0;
  bool has_stream = false;
  uint64_t stream = 0;
  bool has_aux = false;
  uint64_t aux = 0;
  uint32_t thread = 0;
  const std::string* thread_name = nullptr;  // never null
  int32_t result = 0;
  uint64_t stack_id = 0;
  bool cupti_only = false;  // seen by CUPTI, missed by interposition
  format::GradMode grad = format::GradMode::kUnknown;  // a PyTorch block: autograd's grad mode when allocated
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Row(const EventRow& row) = 0;
  // After the last row; `info` is complete then.
  virtual void End(const TraceInfo& info, const ModelStats& model) = 0;
};

// Reads `path` and hands every event to `sink`, then calls End (only when the read succeeded). Fills `*info`.
absl::Status StreamEvents(const std::string& path, EventSink& sink, TraceInfo* info);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_MEMORY_EVENT_STREAM_H_
