// The phases section of `peak` and the summary, as text and as JSON: each NVTX range name (or the --window) with
// how often and how long it ran, and the peak it saw per device and series. Its own file so that the report
// renderers only call it (docs/json.md, "phases").
#ifndef CUMEMTRACE_ANALYZER_RENDER_PHASES_RENDER_H_
#define CUMEMTRACE_ANALYZER_RENDER_PHASES_RENDER_H_

#include <string>

#include "analyzer/model/phases.h"
#include "analyzer/render/json_writer.h"

namespace cumemtrace::analyzer {

// Appends nothing for a trace without phases and without a filter.
void AppendPhasesText(const PhaseResults& phases, int64_t start_ns, std::string* out);
// Writes "phase_filter" and "phases" members (always: null / [] for a trace without them).
void WritePhasesJson(JsonWriter& w, const PhaseResults& phases, int64_t start_ns);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_PHASES_RENDER_H_
