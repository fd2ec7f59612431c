// PendingPhases: the open NVTX ranges from before tracing started (see phase_pending.h).
#include "preload/phase_pending.h"

#include <string.h>

#include "proto/format.h"

namespace cumemtrace::preload {

void PendingPhases::Note(uint32_t kind, uint32_t thread, int32_t tid, const char* thread_name, const char* name,
                         size_t name_size, uint64_t range_id, uint32_t domain, int64_t time_ns) {
  const auto k = static_cast<format::PhaseKind>(kind);
  if (k == format::PhaseKind::kPop) {
    for (size_t i = count_; i-- > 0;) {
      const PendingPhase& p = items_[i];
      if (p.kind == static_cast<uint32_t>(format::PhaseKind::kPush) && p.thread == thread && p.domain == domain) {
        RemoveAt(i);
        return;
      }
    }
    return;
  }
  if (k == format::PhaseKind::kEnd) {
    for (size_t i = count_; i-- > 0;) {
      if (items_[i].kind == static_cast<uint32_t>(format::PhaseKind::kStart) && items_[i].range_id == range_id) {
        RemoveAt(i);
        return;
      }
    }
    return;
  }
  if (k != format::PhaseKind::kPush && k != format::PhaseKind::kStart) return;
  if (count_ == kPendingPhases) {
    ++dropped_;
    return;
  }
  PendingPhase& p = items_[count_++];
  p.thread = thread;
  p.tid = tid;
  p.kind = kind;
  p.domain = domain;
  p.range_id = range_id;
  p.time_ns = time_ns;
  memset(p.thread_name, 0, sizeof(p.thread_name));
  if (thread_name != nullptr) strncpy(p.thread_name, thread_name, sizeof(p.thread_name) - 1);
  p.name_size = static_cast<uint32_t>(name_size < kPendingNameBytes ? name_size : kPendingNameBytes);
  if (p.name_size > 0) memcpy(p.name, name, p.name_size);
}

void PendingPhases::RemoveAt(size_t i) {
  for (size_t j = i + 1; j < count_; ++j) items_[j - 1] = items_[j];
  --count_;
}

}  // namespace cumemtrace::preload
