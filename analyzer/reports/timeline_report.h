// Memory over time as the Perfetto export draws it, from the model and its timelines (History): one counter track
// per (device, series) and per device's driver view, the program's NVTX phases, the failed allocations and the
// peaks as instants. Plain data; export/export_perfetto.cc only lays it out in Perfetto's format. Times are relative
// to the trace's start (`start_ns`, the trace's clock).
#ifndef CUMEMTRACE_ANALYZER_REPORTS_TIMELINE_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_TIMELINE_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/model/analysis.h"
#include "analyzer/model/memory/history.h"

namespace cumemtrace::analyzer {

struct CounterPoint {
  int64_t time_ns = 0;  // relative
  uint64_t bytes = 0;
};

// A counter: its points in time order, one per change (a bucket's maximum at its start, its last value at its end
// when that differs).
struct CounterTrack {
  std::string name;  // "device 0 total"
  std::vector<CounterPoint> points;
};

struct DriverUsed {
  int32_t device = 0;
  int64_t time_ns = 0;  // relative
  uint64_t bytes = 0;   // total - free
};

struct PhaseSpan {
  std::string name;
  uint32_t thread = 0;
  uint32_t domain = 0;
  bool stacked = true;  // pushed on its thread's stack (else a start/end range that may overlap others)
  int64_t begin_ns = 0;  // relative
  int64_t end_ns = 0;
};

// A failed allocation.
struct OomInstant {
  int64_t time_ns = 0;  // relative
  const char* api = "";
  uint64_t requested_bytes = 0;
  int32_t device = 0;
  std::string error;  // CUDA_ERROR_OUT_OF_MEMORY, ...
  uint64_t live_bytes = 0;  // traced live memory in the failure's scope
  bool has_mem_info = false;
  uint64_t free_bytes = 0, total_bytes = 0;
};

// A device's total, or host memory kind's, peak.
struct PeakInstant {
  int64_t time_ns = 0;  // relative
  std::string timeline;  // TimelineName: "device 0 total"
  uint64_t peak_bytes = 0;
};

struct TimelineReport {
  int64_t start_ns = 0;         // the trace's start on its clock
  int32_t pid = 0;
  std::string process_name;     // the command line's first words
  std::vector<CounterTrack> series;  // by device, then series (History's order)
  std::vector<DriverUsed> driver;    // the driver's used bytes, every device's samples in the order taken
  std::vector<PhaseSpan> phases;     // in the order opened
  std::vector<OomInstant> ooms;
  std::vector<PeakInstant> peaks;  // each device's total and host memory peaks
};

TimelineReport BuildTimelineReport(const Analysis& analysis, const History& history);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_TIMELINE_REPORT_H_
