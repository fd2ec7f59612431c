// PyTorch's caching allocator as JSON (see json_torch.h). Every name here is documented in docs/json.md.
#include "analyzer/render/json/json_torch.h"

#include "analyzer/render/json/json_common.h"

namespace cumemtrace::analyzer {
namespace {

void WriteLayer(JsonWriter& w, const TorchLayerSummary& l) {
  w.Member("attached", l.attached);
  w.Member("library", l.library);
  w.Member("config", l.config);
  w.Member("expandable_segments", l.expandable_segments);
  w.Key("max_split_size");
  if (l.max_split_size == 0) {
    w.Null();
  } else {
    w.Uint(l.max_split_size);
  }
  w.Key("unmodelled_settings");
  w.BeginArray();
  for (const std::string& s : l.unmodelled) w.String(s);
  w.EndArray();
  w.Member("at_first_segment", l.at_first_segment);
  w.Member("estimate", l.estimate);
  w.Member("mismatches", l.mismatches);
  w.Member("estimated_blocks", l.estimated_blocks);
  w.Member("predating_frees", l.predating_frees);
}

void WriteFigures(JsonWriter& w, const TorchFigures& f) {
  w.BeginObject();
  w.Member("allocated_bytes", f.allocated_bytes);
  w.Member("allocations", f.allocations);
  w.Member("requested_bytes", f.requested_bytes);
  w.Member("active_bytes", f.active_bytes);
  w.Member("reserved_bytes", f.reserved_bytes);
  w.Member("segments", f.segments);
  w.Member("cached_free_bytes", f.cached_free_bytes);
  w.Member("largest_free_block", f.largest_free_block);
  w.Member("pending_free_bytes", f.pending_free_bytes);
  w.EndObject();
}

void WriteDevice(JsonWriter& w, const TorchPeakSection& s) {
  w.BeginObject();
  w.Member("device", s.device);
  w.Member("phase", s.phase);  // under --phase NAME: the peaks are that phase's; "" for the whole run
  w.Member("allocated_peak_bytes", s.allocated_peak_bytes);
  w.Member("allocated_peak_time_ns", s.allocated_peak_time_ns);
  w.Member("allocated_peak_seq", s.allocated_peak_seq);
  w.Member("allocated_peak_count", s.allocated_peak_count);
  w.Member("requested_peak_bytes", s.requested_peak_bytes);
  w.Member("allocations_peak", s.allocations_peak);
  w.Member("reserved_peak_bytes", s.reserved_peak_bytes);
  w.Member("reserved_peak_time_ns", s.reserved_peak_time_ns);
  w.Member("reserved_peak_seq", s.reserved_peak_seq);
  w.Member("allocated_at_reserved_peak", s.allocated_at_reserved_peak);
  w.Member("allocations_at_reserved_peak", s.allocations_at_reserved_peak);
  w.Member("unallocated_at_reserved_peak", s.unallocated_at_reserved_peak);
  w.Member("segments_peak", s.segments_peak);
  w.Member("alloc_events", s.alloc_events);
  w.Member("ooms", s.ooms);
  w.Key("at_end");
  WriteFigures(w, s.at_end);
  w.Key("at_allocated_peak");
  WriteGroups(w, s.at_allocated_peak);
  w.Member("allocated_peak_groups", s.allocated_peak_groups);
  w.Member("allocated_peak_other_bytes", s.allocated_peak_other_bytes);
  w.Key("at_reserved_peak");
  WriteGroups(w, s.at_reserved_peak);
  w.Member("reserved_peak_groups", s.reserved_peak_groups);
  w.Member("reserved_peak_other_bytes", s.reserved_peak_other_bytes);
  WriteAutogradJson(w, s.autograd);  // at the allocated peak
  w.EndObject();
}

}  // namespace

void WriteVerdictJson(JsonWriter& w, const OomVerdict& v) {
  w.Key("verdict");
  w.BeginObject();
  w.Member("cause", OomCauseName(v.cause));
  w.Member("request_bytes", v.request_bytes);
  w.Key("driver_free_bytes");
  if (v.has_driver_free) {
    w.Uint(v.driver_free_bytes);
  } else {
    w.Null();
  }
  w.Key("device_total_bytes");
  if (v.device_total_bytes != 0) {
    w.Uint(v.device_total_bytes);
  } else {
    w.Null();
  }
  w.Member("allocated_bytes", v.allocated_bytes);
  w.Member("reserved_bytes", v.reserved_bytes);
  w.Member("reserved_unallocated_bytes", v.reserved_unallocated_bytes);
  w.Member("largest_free_block", v.largest_free_block);
  w.Member("pending_free_bytes", v.pending_free_bytes);
  w.Member("tensors", v.tensors);
  w.Member("shortfall_bytes", v.shortfall_bytes);
  w.Member("cause_suffices", v.cause_suffices);
  w.Member("still_short_bytes", v.still_short_bytes);
  w.Member("outside_traced_bytes", v.outside_traced_bytes);
  w.Key("outside_untraced_bytes");
  if (v.has_outside_untraced) {
    w.Uint(v.outside_untraced_bytes);
  } else {
    w.Null();
  }
  w.Key("outside");
  w.BeginArray();
  for (const OutsideOwner& o : v.outside) {
    w.BeginObject();
    w.Member("owner", o.name.slug);
    w.Member("name", o.name.display_name);
    w.Member("bytes", o.bytes);
    w.EndObject();
  }
  w.EndArray();
  w.Member("expandable_segments", v.expandable_segments);
  w.EndObject();
}

void WriteAutogradJson(JsonWriter& w, const AutogradView& v) {
  w.Key("autograd");
  w.BeginObject();
  w.Member("grad_mode_known", v.grad_known);
  w.Member("live_bytes", v.live_bytes);
  w.Member("recording_bytes", v.recording_bytes);
  const GraphFinding& f = v.finding;
  w.Key("fix");
  if (f.fix == GraphFix::kNone) {
    w.Null();
  } else {
    w.String(GraphFixName(f.fix));
  }
  w.Member("fix_bytes", f.bytes);
  w.Member("fix_tensors", f.count);
  w.Member("backward_passes", f.backward_passes);
  w.Member("steps", f.steps);
  w.Key("where");
  if (f.where.has_value()) {
    WriteFrame(w, *f.where);
  } else {
    w.Null();
  }
  w.Key("backward");
  w.BeginObject();
  w.Member("bytes", v.backward.bytes);
  w.Member("tensors", v.backward.count);
  w.Member("named_bytes", v.backward.named_bytes);
  w.Key("nodes");
  w.BeginArray();
  for (const BackwardNode& n : v.backward.nodes) {
    w.BeginObject();
    w.Key("node");
    if (n.node.empty()) {
      w.Null();
    } else {
      w.String(n.node);
    }
    w.Member("bytes", n.bytes);
    w.Member("tensors", n.count);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.EndObject();
}

void WriteOtherProcessesJson(JsonWriter& w, const OtherProcesses& p) {
  w.Key("other_processes");
  if (!p.listed) {
    w.Null();
  } else {
    w.BeginArray();
    for (const GpuProcessInfo& process : p.others) {
      w.BeginObject();
      w.Member("pid", process.pid);
      w.Key("bytes");
      if (process.used_unknown) {
        w.Null();
      } else {
        w.Uint(process.used_bytes);
      }
      w.Member("command", process.command);
      w.EndObject();
    }
    w.EndArray();
  }
  w.Member("processes_listed_at_failure", p.at_failure);
  w.Member("processes_pids", p.pids == GpuProcessesInfo::Pids::kSame             ? "same"
                             : p.pids == GpuProcessesInfo::Pids::kOtherNamespace ? "other_namespace"
                                                                                 : "unknown");
  w.Member("processes_error", p.error);
}

void WriteTorchPeaksJson(JsonWriter& w, const PeakReport& r) {
  if (!r.torch_layer.present) return;
  w.Key("allocator");
  w.BeginObject();
  WriteLayer(w, r.torch_layer);
  w.Key("devices");
  w.BeginArray();
  for (const TorchPeakSection& s : r.torch) WriteDevice(w, s);
  w.EndArray();
  w.EndObject();
}

void WriteTorchLeaksJson(JsonWriter& w, const LeakReport& r) {
  if (!r.torch_layer.present) return;
  w.Key("allocator_leaks");
  w.BeginObject();
  w.Member("tensor_count", r.tensor_count);
  w.Member("tensor_requested_bytes", r.tensor_requested_bytes);
  w.Member("tensor_allocated_bytes", r.tensor_allocated_bytes);
  w.Member("pytorch_reserved_bytes", r.pytorch_reserved_bytes);
  w.Member("pytorch_cached_bytes", r.pytorch_cached_bytes);
  w.Member("pytorch_cache_driver_bytes", r.pytorch_cache_driver_bytes);
  w.Member("estimate", r.torch_layer.estimate);
  w.EndObject();
}

void WriteTorchOomsJson(JsonWriter& w, const OomReport& r) {
  if (!r.torch_layer.present) return;
  w.Key("torch_ooms");
  w.BeginArray();
  for (const TorchOomEntry& o : r.torch_ooms) {
    w.BeginObject();
    w.Member("seq", o.seq);
    w.Member("time_ns", o.time_ns);
    w.Member("device", o.device);
    w.Member("stream", HexString(o.stream));
    w.Member("thread", o.thread_name);
    w.Member("thread_index", o.thread);
    WriteVerdictJson(w, o.verdict);
    w.Key("tensors");
    WriteGroups(w, o.tensors);
    w.Member("tensor_groups", o.tensor_groups);
    w.Member("tensor_other_bytes", o.tensor_other_bytes);
    w.Key("tensors_by_python");
    WriteGroups(w, o.tensors_by_python);
    w.Member("python_groups", o.python_groups);
    w.Member("python_other_bytes", o.python_other_bytes);
    WriteAutogradJson(w, o.autograd);
    WriteOtherProcessesJson(w, o.verdict.processes);
    w.EndObject();
  }
  w.EndArray();
  w.Member("torch_oom_count", r.torch_total);
  // The allocator replay's answers (oom only; null where it did not run).
  w.Key("replay_checks");
  if (!r.replayed || !r.replay_unchecked.empty()) {
    w.Null();
  } else {
    w.BeginArray();
    for (const ReplayCheck& c : r.replay_checks) {
      w.BeginObject();
      w.Member("setting", c.setting);
      w.Member("without_outside", c.without_outside);
      w.Member("oom", c.oom);
      w.Key("reserved_peak");
      if (c.oom) {
        w.Null();
      } else {
        w.Uint(c.reserved_peak);
      }
      w.EndObject();
    }
    w.EndArray();
  }
  w.Member("replay_unchecked", r.replay_unchecked);
  w.Member("replay_under_cap", r.replay_under_cap);
}

}  // namespace cumemtrace::analyzer
