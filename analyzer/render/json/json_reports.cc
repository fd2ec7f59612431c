// Each report as a JSON document. Every name here is documented in docs/json.md; never rename one without
// bumping kJsonSchemaVersion.
#include "analyzer/render/json/json_reports.h"

#include "analyzer/render/json/json_common.h"
#include "analyzer/render/json/json_owners.h"
#include "analyzer/render/phases_render.h"
#include "analyzer/render/json/json_torch.h"

namespace cumemtrace::analyzer {
namespace {

constexpr int kIndent = 2;

void WritePeakSection(JsonWriter& w, const PeakSection& s) {
  w.BeginObject();
  w.Member("device", s.device);
  w.Member("kind", s.kind);
  w.Member("peak_bytes", s.peak_bytes);
  w.Member("peak_count", s.peak_count);
  w.Member("peak_time_ns", s.peak_time_ns);
  w.Member("peak_seq", s.peak_seq);
  w.Member("final_bytes", s.final_bytes);
  w.Member("final_count", s.final_count);
  w.Member("allocations", s.allocations);
  w.Member("allocated_bytes", s.allocated_bytes);
  w.Key("top");
  WriteGroups(w, s.top);
  w.Member("stack_groups", s.group_count);
  w.Member("other_bytes", s.other_bytes);
  w.Member("other_count", s.other_count);
  w.EndObject();
}

void WritePeaks(JsonWriter& w, const PeakReport& r) {
  w.Key("peaks");
  w.BeginArray();
  for (const PeakSection& s : r.peaks) WritePeakSection(w, s);
  w.EndArray();
  w.Key("device_totals");
  w.BeginArray();
  for (const PeakSection& s : r.device_totals) WritePeakSection(w, s);
  w.EndArray();
  WritePhasesJson(w, r.phases, r.start_ns);
  WriteTorchPeaksJson(w, r);
}

void WriteLeaks(JsonWriter& w, const LeakReport& r) {
  w.Key("leaks");
  w.BeginArray();
  for (const LeakEntry& e : r.top) {
    w.BeginObject();
    w.Member("device", e.device);
    w.Member("kind", e.kind);
    w.Member("bytes", e.bytes);
    w.Member("count", e.count);
    w.Member("stack_id", e.stack_id);
    w.Key("stack");
    WriteStack(w, e.frames);
    WriteLabel(w, e.label);
    if (r.torch_layer.present) w.Member("cached_by_pytorch", e.pytorch_cache);
    w.Key("growth");
    w.BeginArray();
    for (uint64_t b : e.growth) w.Uint(b);
    w.EndArray();
    w.Member("phase", e.phase);
    w.EndObject();
  }
  w.EndArray();
  w.Key("leak_totals");
  w.BeginArray();
  for (const LeakTotal& t : r.totals) {
    w.BeginObject();
    w.Member("device", t.device);
    w.Member("kind", format::KindName(t.kind));
    w.Member("bytes", t.bytes);
    w.Member("count", t.count);
    w.EndObject();
  }
  w.EndArray();
  w.Key("leak_summary");
  w.BeginObject();
  w.Member("memory_bytes", r.memory_bytes);
  w.Member("memory_count", r.memory_count);
  w.Member("stack_groups", r.group_count);
  w.Member("clean_end", r.clean_end);
  w.EndObject();
  WriteTorchLeaksJson(w, r);
}

void WriteOoms(JsonWriter& w, const OomReport& r) {
  w.Key("ooms");
  w.BeginArray();
  for (const OomEntry& o : r.ooms) {
    w.BeginObject();
    w.Member("seq", o.seq);
    w.Member("time_ns", o.time_ns);
    w.Member("device", o.device);
    w.Member("kind", o.kind);
    w.Member("api", o.api);
    w.Member("requested_bytes", o.requested_bytes);
    w.Member("error", o.error);
    w.Member("error_code", o.error_code);
    w.Member("has_mem_info", o.has_mem_info);
    w.Key("free_bytes");
    if (o.has_mem_info) {
      w.Uint(o.free_bytes);
    } else {
      w.Null();
    }
    w.Key("total_bytes");
    if (o.has_mem_info) {
      w.Uint(o.total_bytes);
    } else {
      w.Null();
    }
    w.Member("live_scope", o.live_is_host ? "host" : "device");
    w.Member("live_bytes", o.live_bytes);
    w.Member("live_count", o.live_count);
    w.Member("thread", o.thread_name);
    w.Member("thread_index", o.thread);
    w.Member("phase", o.phase);
    w.Member("stack_id", o.stack_id);
    w.Key("stack");
    WriteStack(w, o.stack);
    w.Key("user_frame");
    if (o.request.user_frame.has_value()) {
      WriteFrame(w, *o.request.user_frame);
    } else {
      w.Null();
    }
    w.Key("live_by_stack");
    if (o.snapshot_taken) {
      WriteGroups(w, o.live_by_stack);
    } else {
      w.Null();
    }
    w.Member("stack_groups", o.group_count);
    w.Member("other_bytes", o.other_bytes);
    w.Member("other_count", o.other_count);
    WriteOtherProcessesJson(w, o.processes);
    if (o.has_verdict) WriteVerdictJson(w, o.verdict);
    w.Member("recovered", o.recovered);
    w.EndObject();
  }
  w.EndArray();
  w.Member("oom_count", r.total);
  w.Member("recovered_count", r.recovered);
  WriteTorchOomsJson(w, r);
}

void WritePinned(JsonWriter& w, const PinnedReport& r) {
  w.Key("pinned");
  w.BeginObject();
  w.Member("peak_bytes", r.peak_bytes);
  w.Member("peak_time_ns", r.peak_time_ns);
  w.Member("final_bytes", r.final_bytes);
  w.Member("allocations", r.allocations);
  w.Member("allocated_bytes", r.allocated_bytes);
  w.Member("window_ns", r.window_ns);
  w.EndObject();
  w.Key("pinned_spikes");
  w.BeginArray();
  for (const PinnedSpike& s : r.spikes) {
    w.BeginObject();
    w.Member("start_ns", s.start_ns);
    w.Member("end_ns", s.end_ns);
    w.Member("rise_bytes", s.rise_bytes);
    w.Member("start_bytes", s.start_bytes);
    w.Member("max_bytes", s.max_bytes);
    w.Member("window_allocated_bytes", s.window_allocated_bytes);
    w.Member("window_allocations", s.window_allocations);
    w.Member("thread", s.thread_name);
    w.Member("thread_index", s.thread);
    w.Member("allocated_bytes", s.allocated_bytes);
    w.Member("stack_id", s.stack_id);
    w.Key("stack");
    WriteStack(w, s.stack);
    WriteLabel(w, s.label);
    w.EndObject();
  }
  w.EndArray();
  w.Key("pinned_timeline");
  w.BeginArray();
  for (const TimelinePoint& p : r.timeline) {
    w.BeginObject();
    w.Member("time_ns", p.time_ns);
    w.Member("bytes", p.bytes);
    w.EndObject();
  }
  w.EndArray();
}

template <typename Body>
std::string Document(const Overview& overview, absl::string_view command, Body body) {
  std::string out;
  JsonWriter w(&out, kIndent);
  w.BeginObject();
  WriteOverview(w, overview, command);
  if (overview.phases != nullptr) WritePhaseFilterJson(w, *overview.phases);
  body(w);
  w.EndObject();
  out.push_back('\n');
  return out;
}

}  // namespace

std::string SummaryJson(const Overview& overview, const SummaryReport& r) {
  return Document(overview, "summary", [&](JsonWriter& w) {
    WritePeaks(w, r.peak);
    WriteLeaks(w, r.leaks);
    WriteOoms(w, r.ooms);
    WritePinned(w, r.pinned);
    WriteOwnersJson(w, r.owners, r.driver_memory);
  });
}

std::string PeakJson(const Overview& overview, const PeakReport& r) {
  return Document(overview, "peak", [&](JsonWriter& w) { WritePeaks(w, r); });
}

std::string LeaksJson(const Overview& overview, const LeakReport& r) {
  return Document(overview, "leaks", [&](JsonWriter& w) { WriteLeaks(w, r); });
}

std::string OomJson(const Overview& overview, const OomReport& r) {
  return Document(overview, "oom", [&](JsonWriter& w) { WriteOoms(w, r); });
}

std::string PinnedJson(const Overview& overview, const PinnedReport& r) {
  return Document(overview, "pinned", [&](JsonWriter& w) { WritePinned(w, r); });
}

}  // namespace cumemtrace::analyzer
