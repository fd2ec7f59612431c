// The phases section of `peak` and the summary, as text and as JSON: each NVTX range name (or the --window) with
// how often and how long it ran, and the peak it saw per device and series. Its own file so that the report
// renderers only call it (docs/json.md, "phases").
#ifndef CUMEMTRACE_ANALYZER_RENDER_PHASES_RENDER_H_
#define CUMEMTRACE_ANALYZER_RENDER_PHASES_RENDER_H_

#include <string>

#include "analyzer/model/usage/phases.h"
#include "analyzer/render/json/json_writer.h"

namespace cumemtrace::analyzer {

// "Peak per phase": nothing for a trace without phases.
void AppendPhasesText(const PhaseResults& phases, int64_t start_ns, std::string* out);
// The line that says a report is narrowed to --phase / --window (nothing without one).
void AppendPhaseFilterText(const PhaseResults& phases, std::string* out);
// The "phases", "phase_ranges" and "phase_*" members (always: [] for a trace without phases).
void WritePhasesJson(JsonWriter& w, const PhaseResults& phases, int64_t start_ns);
// The "phase_filter" member of every report (null without --phase / --window).
void WritePhaseFilterJson(JsonWriter& w, const PhaseResults& phases);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_PHASES_RENDER_H_
