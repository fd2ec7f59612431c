// The pinned report: the model's windows ranked by rise, with who allocated in them.
#include "analyzer/reports/pinned_report.h"

#include <algorithm>

namespace cumemtrace::analyzer {

PinnedReport BuildPinnedReport(const Analysis& a, const ReportOptions& options, FrameResolver& resolver) {
  PinnedReport r;
  const PinnedResult& p = a.pinned;
  r.computed = p.computed;
  if (!p.computed) return r;
  r.peak_bytes = p.peak_bytes;
  r.peak_time_ns = p.peak_time_ns;
  r.final_bytes = p.final_bytes;
  r.allocations = p.allocations;
  r.allocated_bytes = p.allocated_bytes;
  r.window_ns = p.window_ns;
  r.timeline = p.timeline;

  std::vector<const PinnedWindow*> rising;
  for (const PinnedWindow& w : p.windows) {
    if (w.rise_bytes > 0) rising.push_back(&w);
  }
  std::stable_sort(rising.begin(), rising.end(),
                   [](const PinnedWindow* x, const PinnedWindow* y) { return x->rise_bytes > y->rise_bytes; });
  if (rising.size() > options.top) rising.resize(options.top);
  for (const PinnedWindow* w : rising) {
    PinnedSpike s;
    s.start_ns = w->start_ns;
    s.end_ns = w->end_ns;
    s.rise_bytes = w->rise_bytes;
    s.start_bytes = w->start_bytes;
    s.max_bytes = w->max_bytes;
    s.window_allocated_bytes = w->allocated_bytes;
    s.window_allocations = w->allocations;
    s.thread = w->top_thread;
    s.thread_name = a.info.ThreadName(w->top_thread);
    s.stack_id = w->top_stack;
    s.allocated_bytes = w->top_allocated_bytes;
    s.stack = resolver.ResolveStack(w->top_stack, options.frames);
    s.view = MakeStackView(w->top_stack, options, resolver, a.grouper.get());
    s.label = LabelGroup(w->top_key, w->top_stack, w->top_stacks, a.grouper.get(), resolver);
    r.spikes.push_back(std::move(s));
  }
  return r;
}

}  // namespace cumemtrace::analyzer
