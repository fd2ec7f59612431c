// `cumem-analyze whatif TRACE [--set KEY:VALUE]... [--capacity SIZE] [--without-outside] [--json]`: the trace's
// PyTorch requests replayed through the caching allocator, first under the recorded settings (checked against the
// recorded run), then under the ones asked for. The replay is a pass of its own over the trace
// (model/torch/allocator_whatif.h).
#include "analyzer/commands/command.h"
#include "analyzer/model/torch/allocator_whatif.h"
#include "analyzer/render/json/json_whatif.h"
#include "analyzer/render/text/text_whatif.h"
#include "analyzer/reports/whatif_report.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  WhatIfOptions options;
  options.settings = cl.settings;
  options.capacity = cl.capacity;
  options.without_outside = cl.without_outside;
  absl::StatusOr<WhatIf> replay = ReplayWhatIf(cl.trace, options);
  if (!replay.ok()) return console.Error(replay.status());
  const WhatIfReport report = BuildWhatIfReport(*std::move(replay));
  return console.Report(cl.json ? WhatIfJson(report) : WhatIfText(report));
}

}  // namespace

extern const CommandSpec kWhatIfCommand = {
    "whatif", "TRACE.pb [--set KEY:VALUE]... [--capacity SIZE] [--without-outside] [--json]",
    "replays PyTorch's caching allocator on the trace's requests: would the OOM go away with another\n"
    "PYTORCH_CUDA_ALLOC_CONF setting, on another card, or without the memory outside PyTorch? The replay is\n"
    "first checked against the recorded run (every segment, every block's address, the OOM at the same\n"
    "request); an answer is given only when that holds. Without options: the recorded settings",
    Operands::kOneTrace, kFlagJson | kFlagWhatIf, OutputFile::kNone, Run};

}  // namespace cumemtrace::analyzer
