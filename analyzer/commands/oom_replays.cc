#include "analyzer/commands/oom_replays.h"

#include <string>
#include <vector>

#include "analyzer/model/torch/allocator_whatif.h"

namespace cumemtrace::analyzer {

namespace {

// Replays made by the way (for oom and the summary) hold at most this many allocator events: about 110 MB, so that
// the default report's memory stays bounded on traces of hours; `whatif` has no such limit.
constexpr size_t kMaxReplayEvents = size_t{2} << 20;

}  // namespace

void AddOomReplays(const CommandLine& cl, OomReport* report) {
  if (report->torch_ooms.empty()) return;
  if (report->replay_steps > kMaxReplayEvents) {
    // Known from the analysis already: no second read of a long trace only to find it too long.
    report->replayed = true;
    report->replay_unchecked = ReplayTooLong(report->replay_steps, kMaxReplayEvents);
    return;
  }
  absl::StatusOr<ReplayInputPtr> input = ReadReplayInput(cl.trace, kMaxReplayEvents);
  if (absl::IsResourceExhausted(input.status())) {
    report->replayed = true;
    report->replay_unchecked = std::string(input.status().message());
    return;
  }
  if (!input.ok()) return;  // the trace was read once already: nothing new to say about it
  std::vector<WhatIf> replays = {ReplayWhatIf(**input, WhatIfOptions{})};
  for (const WhatIfOptions& options : OomReplayCandidates(replays.front())) {
    replays.push_back(ReplayWhatIf(**input, options));
  }
  AddReplayChecks(replays, report);
}

}  // namespace cumemtrace::analyzer
