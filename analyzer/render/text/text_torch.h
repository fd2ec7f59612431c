// PyTorch's caching allocator in the text reports: the layer's note (config, exact or estimated extents), the
// tensor and reserved peaks per device, the OOM verdicts and the cache kept at exit. Layout only: must never
// compute anything the reports did not, and must print nothing for a trace without the layer.
#ifndef CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_TORCH_H_
#define CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_TORCH_H_

#include <string>
#include <vector>

#include "analyzer/reports/leak_report.h"
#include "analyzer/reports/oom_report.h"
#include "analyzer/reports/torch_report.h"

namespace cumemtrace::analyzer {

// "PyTorch's caching allocator: ..." (one or two lines), or nothing without the layer.
void AppendTorchLayerNote(const TorchLayerSummary& layer, std::string* out);
// The tensor/reserved peak of each device with what was live, grouped.
void AppendTorchPeaks(const std::vector<TorchPeakSection>& sections, bool details, std::string* out);
// Only their figures (two lines per device), for the summary.
void AppendTorchPeakFigures(const std::vector<TorchPeakSection>& sections, std::string* out);
// "fragmentation: ...", "live tensors: ...", "memory outside PyTorch: ..." (no newline).
std::string VerdictText(const OomVerdict& verdict, const std::vector<ResolvedGroup>& tensors);
// What autograd kept alive and the change to make ("Autograd: ... Wrap ... in `with torch.no_grad():`."), one line
// with its newline; "" when there is no finding.
std::string AutogradText(const AutogradView& view);
// "Backward pass: X in N tensors made by autograd's engine: MmBackward0 ..., ..." (one line), "" when none.
std::string BackwardText(const BackwardAttribution& backward);
// "Other processes on GPU 0 at the failure: pid 818 (python3 x.py) 59.98 GiB." (one line), "" when none were
// listed and nothing says why.
std::string OtherProcessesText(int32_t device, const OtherProcesses& processes);
// One TORCH_OOM: the verdict, PyTorch's figures, and (details) the tensors live then by group and Python frame.
void AppendTorchOom(const TorchOomEntry& oom, bool details, std::string* out);
// The diagnosis line of the leak report when the trace has the layer: tensors apart from the cache.
std::string TorchLeakDiagnosis(const LeakReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_TORCH_H_
