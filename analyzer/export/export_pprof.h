// `cumem-analyze pprof`: a gzipped pprof profile (proto/pprof_profile.proto, pprof's own field numbers) for
// `go tool pprof`, pprof's web UI and speedscope. Sample types alloc_objects, alloc_space (every successful
// allocation of memory over the trace), inuse_objects, inuse_space (live at each peak, or at the end with --leaks),
// the default last, as speedscope takes the last one. Each stack is one location per frame, leaf first; Python frames
// and native frames alike, named by function with file and line. In-use samples carry a "timeline" label
// ("device 0 total"), since each peak is its own moment.
#ifndef CUMEMTRACE_ANALYZER_EXPORT_EXPORT_PPROF_H_
#define CUMEMTRACE_ANALYZER_EXPORT_EXPORT_PPROF_H_

#include <string>

#include "analyzer/reports/profile_report.h"

namespace cumemtrace::analyzer {

// The serialized (not yet gzipped) Profile.
std::string PprofProfile(const ProfileReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_EXPORT_EXPORT_PPROF_H_
