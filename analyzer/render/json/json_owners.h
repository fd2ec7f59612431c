// The `owners` and `driver_memory` keys (docs/json.md describes them): the summary's, and the HTML page's data,
// which use the same names.
#ifndef CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_OWNERS_H_
#define CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_OWNERS_H_

#include "analyzer/render/json/json_writer.h"
#include <vector>

#include "analyzer/model/usage/driver_memory.h"
#include "analyzer/model/usage/owners.h"

namespace cumemtrace::analyzer {

// Members `owners` and `driver_memory`, into the open object.
void WriteOwnersJson(JsonWriter& w, const std::vector<OwnerUsage>& owners,
                     const std::vector<DriverMemory>& driver_memory);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_OWNERS_H_
