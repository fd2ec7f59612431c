// The summary's `owners` and `driver_memory` keys (docs/json.md describes them).
#ifndef CUMEMTRACE_ANALYZER_RENDER_JSON_OWNERS_H_
#define CUMEMTRACE_ANALYZER_RENDER_JSON_OWNERS_H_

#include "analyzer/render/json_writer.h"
#include "analyzer/reports/summary_report.h"

namespace cumemtrace::analyzer {

// Members `owners` and `driver_memory`, into the open object.
void WriteOwnersJson(JsonWriter& w, const SummaryReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_JSON_OWNERS_H_
