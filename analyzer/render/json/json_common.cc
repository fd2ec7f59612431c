// JSON for the parts every document shares. Every name here is documented in docs/json.md; never rename one
// without bumping kJsonSchemaVersion.
#include "analyzer/render/json/json_common.h"

#include "absl/strings/str_format.h"

namespace cumemtrace::analyzer {

std::string HexString(uint64_t value) { return absl::StrFormat("0x%x", value); }

const char* FrameKindName(FrameKind kind) {
  switch (kind) {
    case FrameKind::kNative: return "native";
    case FrameKind::kPython: return "python";
    case FrameKind::kNoPython: return "no_python";
  }
  return "native";
}

void WriteFrame(JsonWriter& w, const Frame& f) {
  w.BeginObject();
  w.Member("kind", FrameKindName(f.kind));
  w.Member("function", f.function);
  w.Key("module");
  if (f.module.empty()) {
    w.Null();
  } else {
    w.String(f.module);
  }
  w.Key("file");
  if (f.file.empty()) {
    w.Null();
  } else {
    w.String(f.file);
  }
  w.Key("line");
  if (f.line == 0) {
    w.Null();
  } else {
    w.Uint(f.line);
  }
  w.Member("pc", HexString(f.pc));
  w.Key("offset");
  if (f.offset.has_value()) {
    w.String(HexString(*f.offset));
  } else {
    w.Null();
  }
  w.EndObject();
}

void WriteStack(JsonWriter& w, const std::vector<Frame>& frames) {
  w.BeginArray();
  for (const Frame& f : frames) WriteFrame(w, f);
  w.EndArray();
}

void WriteLabel(JsonWriter& w, const GroupLabel& label) {
  w.Key("user_frame");
  if (label.user_frame.has_value()) {
    WriteFrame(w, *label.user_frame);
  } else {
    w.Null();
  }
  w.Key("group_frame");
  if (label.group_frame.has_value()) {
    WriteFrame(w, *label.group_frame);
  } else {
    w.Null();
  }
  w.Member("stacks", label.stacks);
}

void WriteGroups(JsonWriter& w, const std::vector<ResolvedGroup>& groups) {
  w.BeginArray();
  for (const ResolvedGroup& g : groups) {
    w.BeginObject();
    w.Member("bytes", g.bytes);
    w.Member("count", g.count);
    w.Member("share", g.share);
    w.Member("stack_id", g.stack_id);
    w.Key("stack");
    WriteStack(w, g.frames);
    WriteLabel(w, g.label);
    w.EndObject();
  }
  w.EndArray();
}

namespace {

void WriteProcess(JsonWriter& w, const TraceInfo& info) {
  const TraceHeader& h = info.header;
  w.Key("process");
  w.BeginObject();
  w.Member("pid", h.pid);
  w.Member("ppid", h.ppid);
  w.Key("argv");
  w.BeginArray();
  for (const std::string& arg : h.argv) w.String(arg);
  w.EndArray();
  w.Member("hostname", h.hostname);
  w.Member("executable", h.executable);
  w.Member("tool_version", h.tool_version);
  w.Member("format_version", h.format_version);
  w.Member("start_unix_time_ns", h.start_unix_time_ns);
  w.Member("start_time_ns", h.start_time_ns);
  w.Member("duration_ns", info.DurationNs());
  w.Member("time_unit_ns", info.stats.time_unit_ns);
  w.Member("driver_version", h.driver_version);
  w.Member("stack_depth", h.stack_depth);
  w.Member("torch_stack_depth", h.torch_stack_depth);
  auto optional_int = [&](const char* name, int32_t value) {  // -1: not set by the launcher
    w.Key(name);
    if (value >= 0) {
      w.Int(value);
    } else {
      w.Null();
    }
  };
  optional_int("rank", h.rank);
  optional_int("local_rank", h.local_rank);
  optional_int("world_size", h.world_size);
  w.Member("forked_child", h.forked_child);
  w.Member("python_frames_enabled", h.python_frames_enabled);
  w.Member("cupti_enabled", h.cupti_enabled);
  w.EndObject();
}

void WriteDevices(JsonWriter& w, const TraceInfo& info) {
  w.Key("devices");
  w.BeginArray();
  for (const auto& [ordinal, d] : info.devices) {
    w.BeginObject();
    w.Member("device", d.ordinal);
    w.Member("name", d.name);
    std::string uuid;
    for (unsigned char c : d.uuid) absl::StrAppendFormat(&uuid, "%02x", c);
    w.Member("uuid", uuid);
    w.Member("total_memory", d.total_memory);
    w.Member("driver_version", d.driver_version);
    w.EndObject();
  }
  w.EndArray();
}

void WriteThreads(JsonWriter& w, const TraceInfo& info) {
  w.Key("threads");
  w.BeginArray();
  for (const auto& [index, t] : info.threads) {
    w.BeginObject();
    w.Member("thread", t.index);
    w.Member("tid", t.tid);
    w.Member("name", t.name);
    w.EndObject();
  }
  w.EndArray();
}

void WriteHealth(JsonWriter& w, const Overview& o) {
  const TraceInfo& info = *o.info;
  const ReadStats& s = info.stats;
  w.Key("health");
  w.BeginObject();
  w.Member("has_trailer", info.has_trailer);
  w.Member("truncated", s.truncated);
  w.Key("truncated_at");
  if (s.truncated) {
    w.Uint(s.truncated_at);
  } else {
    w.Null();
  }
  w.Member("file_bytes", s.bytes);
  w.Member("packets", s.packets);
  w.Member("events_read", s.events);
  w.Member("unknown_api_events", s.unknown_api_events);
  w.Member("order_exact", s.late_events == 0);
  w.Member("order_marked", s.order_marked);
  w.Member("late_events", s.late_events);
  w.Member("max_lateness", s.max_lateness);
  w.Member("damaged_packets", s.damaged_packets);
  w.Member("skipped_bytes", s.skipped_bytes);
  w.Member("undecodable_batches", s.undecodable_batches);
  w.Member("failed_allocations", o.model.failed_allocations);
  w.Member("failed_frees", o.model.failed_frees);
  w.Member("unmatched_frees", o.model.unmatched_frees);
  if (o.allocator_layer) w.Member("predating_torch_frees", o.model.predating_torch_frees);
  w.Member("overwritten_allocations", o.model.overwritten);
  // The preload's own counters, from the trailer; null without one.
  const TrailerInfo& t = info.trailer;
  auto trailer_field = [&](const char* name, uint64_t value) {
    w.Key(name);
    if (info.has_trailer) {
      w.Uint(value);
    } else {
      w.Null();
    }
  };
  trailer_field("events", t.events);
  trailer_field("dropped_events", t.dropped_events);
  trailer_field("unwind_failures", t.unwind_failures);
  trailer_field("truncated_stacks", t.truncated_stacks);
  trailer_field("dropped_frames", t.dropped_frames);
  trailer_field("bytes_written", t.bytes_written);
  trailer_field("stack_nodes", t.stack_nodes);
  trailer_field("wrapper_slots_exhausted", t.wrapper_slots_exhausted);
  trailer_field("recorder_time_ns", t.recorder_time_ns);
  trailer_field("recorder_python_ns", t.recorder_python_ns);
  trailer_field("recorder_unwind_ns", t.recorder_unwind_ns);
  trailer_field("recorder_lock_wait_ns", t.recorder_lock_wait_ns);
  trailer_field("recorder_stack_ns", t.recorder_stack_ns);
  trailer_field("recorder_prologue_ns", t.recorder_prologue_ns);
  trailer_field("recorder_append_ns", t.recorder_append_ns);
  trailer_field("flushes", t.flushes);
  trailer_field("writer_time_ns", t.writer_time_ns);
  trailer_field("stalled_seals", t.stalled_seals);
  trailer_field("clock_calibrations", t.clock_calibrations);
  trailer_field("clock_max_error_ns", t.clock_max_error_ns);
  trailer_field("clock_steps", t.clock_steps);
  trailer_field("python_stacks", t.python_stacks);
  trailer_field("python_failures", t.python_failures);
  trailer_field("memory_samples", t.memory_samples);
  trailer_field("cupti_only_events", t.cupti_only_events);
  trailer_field("allocator_events", t.allocator_events);
  trailer_field("allocator_ignored", t.allocator_ignored);
  w.Key("end_time_ns");
  if (info.has_trailer) {
    w.Int(info.Relative(t.end_time_ns));
  } else {
    w.Null();
  }
  w.Key("notices");
  w.BeginArray();
  for (const NoticeInfo& n : info.notices) {
    w.BeginObject();
    w.Member("code", format::NoticeCodeName(n.code));
    w.Member("message", n.message);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace

void WriteOverview(JsonWriter& w, const Overview& o, absl::string_view command) {
  w.Member("schema_version", kJsonSchemaVersion);
  w.Member("command", command);
  w.Member("trace", o.info->path);
  w.Member("group_by", o.group_by);
  WriteProcess(w, *o.info);
  WriteDevices(w, *o.info);
  WriteThreads(w, *o.info);
  WriteHealth(w, o);
}

}  // namespace cumemtrace::analyzer
