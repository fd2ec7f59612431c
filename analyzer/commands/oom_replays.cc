#include "analyzer/commands/oom_replays.h"

#include <vector>

#include "analyzer/model/torch/allocator_whatif.h"

namespace cumemtrace::analyzer {

void AddOomReplays(const CommandLine& cl, OomReport* report) {
  if (report->torch_ooms.empty()) return;
  absl::StatusOr<ReplayInputPtr> input = ReadReplayInput(cl.trace);
  if (!input.ok()) return;  // the trace was read once already: nothing new to say about it
  std::vector<WhatIf> replays = {ReplayWhatIf(**input, WhatIfOptions{})};
  for (const WhatIfOptions& options : OomReplayCandidates(replays.front())) {
    replays.push_back(ReplayWhatIf(**input, options));
  }
  AddReplayChecks(replays, report);
}

}  // namespace cumemtrace::analyzer
