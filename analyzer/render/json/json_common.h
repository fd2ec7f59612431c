// JSON pieces every report's output shares: the schema version, the overview (process, devices, threads, health),
// stacks, frames and stack groups. docs/json.md documents every name written here; keep the two in step.
#ifndef CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_COMMON_H_
#define CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "analyzer/render/json/json_writer.h"
#include "analyzer/reports/report_common.h"

namespace cumemtrace::analyzer {

inline constexpr int kJsonSchemaVersion = 2;

// "0x1f00"
std::string HexString(uint64_t value);

void WriteFrame(JsonWriter& w, const Frame& frame);
// An array of frames, innermost first.
void WriteStack(JsonWriter& w, const std::vector<Frame>& frames);
// Members user_frame, group_frame and stacks of a group, into the open object.
void WriteLabel(JsonWriter& w, const GroupLabel& label);
// An array of {bytes, count, share, stack_id, stack, user_frame, group_frame, stacks}.
void WriteGroups(JsonWriter& w, const std::vector<ResolvedGroup>& groups);
// Members schema_version, command, trace, process, devices, threads and health, into the open object.
void WriteOverview(JsonWriter& w, const Overview& overview, absl::string_view command);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_COMMON_H_
