// PyTorch's caching allocator in the JSON documents (docs/json.md, "PyTorch's caching allocator"). Every key here
// is written only when the trace has the allocator layer, so the documents of other traces do not change.
#ifndef CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_TORCH_H_
#define CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_TORCH_H_

#include "analyzer/reports/leak_report.h"
#include "analyzer/reports/oom_report.h"
#include "analyzer/reports/peak_report.h"
#include "analyzer/render/json/json_writer.h"

namespace cumemtrace::analyzer {

// Member "allocator": the layer and each device's peaks (peak and summary documents).
void WriteTorchPeaksJson(JsonWriter& w, const PeakReport& report);
// Member "allocator_leaks" (leaks and summary documents).
void WriteTorchLeaksJson(JsonWriter& w, const LeakReport& report);
// Members "torch_ooms", "torch_oom_count", "replay_checks" and "replay_unchecked" (oom and summary documents).
void WriteTorchOomsJson(JsonWriter& w, const OomReport& report);
// Member "verdict" of a failed driver allocation PyTorch's allocator asked for.
void WriteVerdictJson(JsonWriter& w, const OomVerdict& verdict);
// "autograd": what kept the live tensors (the fix and its line) and the backward pass's holders by autograd node.
void WriteAutogradJson(JsonWriter& w, const AutogradView& view);
// "other_processes": the other processes on the device (NVML), null when none were listed.
void WriteOtherProcessesJson(JsonWriter& w, const OtherProcesses& processes);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_TORCH_H_
