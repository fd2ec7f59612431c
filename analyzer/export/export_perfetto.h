// `cumem-analyze perfetto`: memory over time as a Perfetto trace (proto/perfetto_trace.proto, Perfetto's own field
// numbers) for ui.perfetto.dev and trace_processor, which handle long traces far better than Chrome JSON (which
// Perfetto calls legacy). A process track holds one counter track per (device, kind) in bytes, the driver's used
// memory per GPU, the program's NVTX phases as slices, and instant events for each failed allocation and each peak,
// all from the timeline report (reports/timeline_report.h), whose counters come from history.h's buckets: each
// bucket's max at its start and its last value at its end, so the peak is exact and its time is within a bucket.
#ifndef CUMEMTRACE_ANALYZER_EXPORT_EXPORT_PERFETTO_H_
#define CUMEMTRACE_ANALYZER_EXPORT_EXPORT_PERFETTO_H_

#include <string>

#include "analyzer/reports/timeline_report.h"

namespace cumemtrace::analyzer {

// The serialized Trace.
std::string PerfettoTrace(const TimelineReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_EXPORT_EXPORT_PERFETTO_H_
