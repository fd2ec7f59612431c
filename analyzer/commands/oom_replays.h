// The allocator replay's answers for a report's PyTorch OOM (oom and summary): the recorded run replayed, then the
// settings worth trying (reports/oom_report.h: OomReplayCandidates). A second read of the trace, made only when
// the trace has a PyTorch OOM.
#ifndef CUMEMTRACE_ANALYZER_COMMANDS_OOM_REPLAYS_H_
#define CUMEMTRACE_ANALYZER_COMMANDS_OOM_REPLAYS_H_

#include "analyzer/commands/command_line.h"
#include "analyzer/reports/oom_report.h"

namespace cumemtrace::analyzer {

void AddOomReplays(const CommandLine& cl, OomReport* report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_COMMANDS_OOM_REPLAYS_H_
