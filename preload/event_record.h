// One recorded CUDA memory call as the recorder buffers it until the next flush. Plain data.
#ifndef CUMEMTRACE_PRELOAD_EVENT_RECORD_H_
#define CUMEMTRACE_PRELOAD_EVENT_RECORD_H_

#include <stdint.h>

namespace cumemtrace::preload {

struct EventRecord {
  uint64_t seq;
  int64_t time_ns;
  uint64_t address;
  uint64_t size;    // allocations
  uint64_t stream;  // apis with a stream
  uint64_t aux;     // apis with an aux value
  uint64_t stack;
  uint64_t free_bytes;   // failed allocations
  uint64_t total_bytes;
  int32_t device;
  int32_t result;
  uint32_t thread;
  uint16_t api;          // format::Api
  bool has_mem_info;
  bool cupti_only;       // seen by CUPTI, missed by interposition
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_EVENT_RECORD_H_
