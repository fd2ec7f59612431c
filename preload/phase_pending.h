// NVTX ranges opened before tracing started. Tracing starts at the first CUDA memory call, but a program usually
// opens its phases ("train") before it allocates anything: without these the first events would belong to no phase.
// Only ranges still open are kept (a range closed before tracing started says nothing about any event), so the
// buffer stays small; it is static, filled under the recorder's lock, and written when tracing starts.
#ifndef CUMEMTRACE_PRELOAD_PHASE_PENDING_H_
#define CUMEMTRACE_PRELOAD_PHASE_PENDING_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

inline constexpr size_t kPendingPhases = 64;
inline constexpr size_t kPendingNameBytes = 120;

struct PendingPhase {
  uint32_t thread;         // the thread index the recorder gave the thread
  int32_t tid;
  uint32_t kind;           // format::PhaseKind: kPush or kStart
  uint32_t domain;
  uint64_t range_id;
  int64_t time_ns;
  char thread_name[16];
  uint32_t name_size;
  char name[kPendingNameBytes];  // cut at kPendingNameBytes
};

class PendingPhases {
 public:
  // A push or start is kept (dropped and counted when the buffer is full); a pop removes the innermost push of the
  // same thread and domain, an end the start of the same range id; marks are ignored.
  void Note(uint32_t kind, uint32_t thread, int32_t tid, const char* thread_name, const char* name,
            size_t name_size, uint64_t range_id, uint32_t domain, int64_t time_ns);
  size_t size() const { return count_; }
  const PendingPhase& at(size_t i) const { return items_[i]; }
  uint64_t dropped() const { return dropped_; }
  void Clear() { count_ = 0; dropped_ = 0; }

 private:
  void RemoveAt(size_t i);

  PendingPhase items_[kPendingPhases] = {};
  size_t count_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PHASE_PENDING_H_
