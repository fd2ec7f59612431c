// The OOM report from the model's failed-allocation records.
#include "analyzer/reports/oom_report.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "analyzer/model/memory/cuda_errors.h"

namespace cumemtrace::analyzer {

OomReport BuildOomReport(const Analysis& a, const ReportOptions& options, FrameResolver& resolver) {
  OomReport r;
  r.total = a.oom_count;
  for (const OomRecord& rec : a.ooms) {
    const Event& e = rec.event;
    OomEntry o;
    o.seq = e.seq;
    o.phase = rec.phase;
    o.time_ns = a.info.Relative(e.time_ns);
    o.device = e.device;
    o.kind = format::KindName(e.info->kind);
    o.api = e.info->name;
    o.requested_bytes = e.size;
    o.error_code = e.result;
    o.out_of_memory = e.result == kCudaErrorOutOfMemory;
    o.error = CudaErrorString(e.result);
    o.has_mem_info = e.has_mem_info;
    o.free_bytes = e.free_bytes;
    o.total_bytes = e.total_bytes;
    o.live_is_host = rec.scope.scope == SnapshotFilter::Scope::kHostMemory;
    o.live_bytes = rec.live_bytes;
    o.live_count = rec.live_count;
    o.thread = e.thread;
    o.thread_name = a.info.ThreadName(e.thread);
    o.stack_id = e.stack;
    o.stack = resolver.ResolveStack(e.stack, options.frames);
    o.view = MakeStackView(e.stack, options, resolver, a.grouper.get());
    if (a.grouper != nullptr) o.request = LabelGroup(a.grouper->KeyOf(e.stack), e.stack, 1, a.grouper.get(), resolver);
    o.snapshot_taken = rec.live_by_stack.taken;
    if (o.snapshot_taken) {
      o.live_by_stack = ResolveGroups(rec.live_by_stack.groups, rec.live_by_stack.total_bytes, options, resolver,
                                      a.grouper.get());
      o.group_count = rec.live_by_stack.group_count;
      o.other_bytes = rec.live_by_stack.total_bytes;
      o.other_count = rec.live_by_stack.total_count;
      for (const ResolvedGroup& g : o.live_by_stack) {
        o.other_bytes -= g.bytes;
        o.other_count -= g.count;
      }
    }
    o.recovered = rec.recovered;
    if (!o.live_is_host) o.processes = OtherProcessesAt(a.info, e.device, e.seq, e.time_ns);
    if (o.recovered) ++r.recovered;
    if (rec.has_torch) {
      o.has_verdict = true;
      o.verdict = JudgeOom(e.size, e.has_mem_info, e.free_bytes, e.total_bytes, rec.torch,
                           a.allocator.config.expandable_segments);
      o.verdict.processes = o.processes;
    }
    r.ooms.push_back(std::move(o));
  }
  r.torch_layer = BuildTorchLayerSummary(a);
  r.torch_total = a.allocator.oom_count;
  r.replay_steps = a.allocator.replay_steps;
  for (const TorchOomRecord& rec : a.allocator.ooms) {
    TorchOomEntry t;
    t.seq = rec.event.seq;
    t.time_ns = a.info.Relative(rec.event.time_ns);
    t.device = rec.event.device;
    t.stream = rec.event.stream;
    t.thread = rec.event.thread;
    t.thread_name = a.info.ThreadName(rec.event.thread);
    t.verdict = JudgeOom(rec.event.size, true, rec.event.aux, rec.device_total_bytes, rec.at,
                         a.allocator.config.expandable_segments);
    t.verdict.processes = OtherProcessesAt(a.info, rec.event.device, rec.event.seq, rec.event.time_ns);
    t.autograd = BuildAutogradView(rec.retention, a.info.header.executable, resolver);
    t.tensors = ResolveGroups(rec.tensors.groups, rec.tensors.total_bytes, options, resolver, a.grouper.get());
    t.tensor_groups = rec.tensors.group_count;
    OtherThan(rec.tensors, t.tensors, &t.tensor_other_bytes, &t.tensor_other_count);
    t.tensors_by_python = ResolveGroups(rec.tensors_by_python.groups, rec.tensors_by_python.total_bytes, options,
                                        resolver, a.python_grouper.get());
    t.python_groups = rec.tensors_by_python.group_count;
    OtherThan(rec.tensors_by_python, t.tensors_by_python, &t.python_other_bytes, &t.python_other_count);
    r.torch_ooms.push_back(std::move(t));
  }
  return r;
}

std::vector<WhatIfOptions> OomReplayCandidates(const WhatIf& recorded) {
  std::vector<WhatIfOptions> candidates;
  const AllocatorConfig config = ParseAllocatorConfig(recorded.recorded_settings);
  // max_split_size_mb keeps large cached blocks whole for large requests: the setting PyTorch's documentation
  // offers against fragmentation. A few sizes, as users try them.
  if (config.max_split_size == std::numeric_limits<uint64_t>::max()) {
    for (const char* setting : {"max_split_size_mb:128", "max_split_size_mb:512", "max_split_size_mb:2048"}) {
      WhatIfOptions o;
      o.settings.push_back(setting);
      candidates.push_back(o);
    }
  }
  // Expandable segments map pages where a segment would have been made, and unmap the whole pages of free blocks:
  // PyTorch's own message suggests them for fragmentation.
  if (!config.expandable_segments) {
    WhatIfOptions o;
    o.settings.push_back("expandable_segments:True");
    candidates.push_back(o);
  }
  if (recorded.outside_max != 0) {
    WhatIfOptions o;
    o.without_outside = true;
    candidates.push_back(o);
  }
  return candidates;
}

void AddReplayChecks(const std::vector<WhatIf>& replays, OomReport* report) {
  if (replays.empty()) return;
  const WhatIf& recorded = replays.front();
  report->replayed = true;
  if (!recorded.unsupported.empty()) {
    report->replay_unchecked = absl::StrCat("the replay does not restate ", recorded.unsupported, " yet");
    return;
  }
  if (!recorded.fidelity.exact) {
    report->replay_unchecked = absl::StrCat("the replay differs from the recorded run at event ",
                                            recorded.fidelity.diverged_seq, ": ", recorded.fidelity.divergence);
    return;
  }
  if (recorded.capacity == 0 || !recorded.capacity_model_agrees) {
    report->replay_unchecked = "the card's memory less what was outside PyTorch does not reproduce the recorded OOM";
    return;
  }
  report->replay_under_cap = recorded.fidelity.capped_refusals > 0;
  report->cap_low = recorded.fidelity.cap_low;
  report->cap_high = recorded.fidelity.cap_high;
  for (size_t i = 1; i < replays.size(); ++i) {
    const WhatIf& w = replays[i];
    if (!w.whatif.ran || !w.cap_bounds_agree) continue;
    ReplayCheck c;
    c.without_outside = w.without_outside;
    c.setting = w.without_outside ? "" : w.settings.substr(w.settings.rfind(',') + 1);
    c.oom = w.whatif.oom;
    c.reserved_peak = w.whatif.reserved_peak;
    report->replay_checks.push_back(std::move(c));
  }
}

}  // namespace cumemtrace::analyzer
