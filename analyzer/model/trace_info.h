// What a trace says about itself: header, devices, threads, trailer, what the reader found (truncation, unknown
// apis) and the span of event times. Small, and the same for every report.
#ifndef CUMEMTRACE_ANALYZER_MODEL_TRACE_INFO_H_
#define CUMEMTRACE_ANALYZER_MODEL_TRACE_INFO_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

struct TraceInfo {
  std::string path;
  TraceHeader header;
  std::map<int32_t, DeviceInfo> devices;  // by ordinal, latest packet wins
  std::map<uint32_t, ThreadInfo> threads;  // by index, latest packet wins (names change)
  bool has_trailer = false;
  TrailerInfo trailer;
  std::vector<NoticeInfo> notices;  // what the tool said about how the trace was taken, in file order
  // The processes on each GPU (NVML), in file order: every list taken at a failed allocation, and the periodic
  // ones up to kMaxGpuProcessSamples (a long run's later samples are dropped, never a failure's).
  std::vector<GpuProcessesInfo> gpu_processes;
  static constexpr size_t kMaxGpuProcessSamples = 4096;
  size_t gpu_process_samples = 0;  // periodic lists kept
  ReadStats stats;
  bool has_events = false;
  int64_t first_event_time_ns = 0;
  int64_t last_event_time_ns = 0;  // largest event time seen

  // Records the time of an event (first/last).
  void NoteEventTime(int64_t time_ns) {  // inline: once per event
    if (!has_events) {
      has_events = true;
      first_event_time_ns = last_event_time_ns = time_ns;
      return;
    }
    first_event_time_ns = std::min(first_event_time_ns, time_ns);
    last_event_time_ns = std::max(last_event_time_ns, time_ns);
  }

  int64_t StartNs() const { return header.start_time_ns; }
  // The end of the trace: the trailer's end time or the last event, whichever is later.
  int64_t EndNs() const;
  // EndNs() - StartNs(), at least 0.
  int64_t DurationNs() const;
  // `time_ns` relative to the start of the trace (saturating, never overflowing).
  int64_t Relative(int64_t time_ns) const;
  // The thread's latest name, "" when unknown or unnamed.
  const std::string& ThreadName(uint32_t index) const;
  // The latest list of `device`'s processes placed at or before event `seq` (a failure's own list when it has
  // one), or nullptr.
  const GpuProcessesInfo* GpuProcessesAt(int32_t device, uint64_t seq) const;
  // Keeps a list (see gpu_processes).
  void AddGpuProcesses(const GpuProcessesInfo& list);
};

// Subtracts or adds without overflow, saturating at the int64 range.
int64_t SaturatingSub(int64_t a, int64_t b);
int64_t SaturatingAdd(int64_t a, int64_t b);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TRACE_INFO_H_
