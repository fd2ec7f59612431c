// Times relative to the start of the trace, saturating: must never overflow on a damaged clock.
#include "analyzer/model/trace_info.h"

#include <algorithm>
#include <limits>

namespace cumemtrace::analyzer {

int64_t SaturatingSub(int64_t a, int64_t b) {
  const __int128 d = static_cast<__int128>(a) - b;
  if (d > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (d < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  const __int128 s = static_cast<__int128>(a) + b;
  if (s > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (s < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(s);
}

int64_t TraceInfo::EndNs() const {
  int64_t end = StartNs();
  if (has_events) end = std::max(end, last_event_time_ns);
  if (has_trailer) end = std::max(end, trailer.end_time_ns);
  return end;
}

int64_t TraceInfo::DurationNs() const { return std::max<int64_t>(0, SaturatingSub(EndNs(), StartNs())); }

int64_t TraceInfo::Relative(int64_t time_ns) const { return SaturatingSub(time_ns, StartNs()); }

const std::string& TraceInfo::ThreadName(uint32_t index) const {
  static const std::string* const kEmpty = new std::string();
  auto it = threads.find(index);
  return it == threads.end() ? *kEmpty : it->second.name;
}

const GpuProcessesInfo* TraceInfo::GpuProcessesAt(int32_t device, uint64_t seq) const {
  const GpuProcessesInfo* best = nullptr;
  for (const GpuProcessesInfo& list : gpu_processes) {
    if (list.device != device || list.after_seq > seq) continue;
    // The latest place wins; at one place, a failure's list over a periodic one.
    if (best == nullptr || list.after_seq > best->after_seq ||
        (list.after_seq == best->after_seq && list.reason == GpuProcessesInfo::Reason::kFailedAllocation)) {
      best = &list;
    }
  }
  return best;
}

void TraceInfo::AddGpuProcesses(const GpuProcessesInfo& list) {
  if (list.reason != GpuProcessesInfo::Reason::kFailedAllocation) {
    if (gpu_process_samples >= kMaxGpuProcessSamples) return;
    ++gpu_process_samples;
  }
  gpu_processes.push_back(list);
}

}  // namespace cumemtrace::analyzer
