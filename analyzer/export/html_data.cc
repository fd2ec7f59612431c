// HtmlData: interns strings, frames and stacks while writing the timelines, snapshots and tables, then writes
// the interned tables last (the page reads the whole document before drawing, so order does not matter).
#include "analyzer/export/html_data.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "analyzer/model/memory/cuda_errors.h"
#include "analyzer/model/stacks/frame_class.h"
#include "analyzer/render/json/json_owners.h"
#include "analyzer/render/json/json_writer.h"
#include "analyzer/reports/symbolic_frame.h"

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kMaxPhaseBands = 200;  // bands drawn; a page stays small on traces with a range per step

constexpr size_t kMaxFrames = 256;

class Interner {
 public:
  Interner(const Analysis& a, const GroupingOptions& grouping)
      : resolver_(a.stacks, a.symbols, a.python_frames),
        grouper_(a.stacks, a.symbols, a.python_frames, a.info.header.executable, grouping) {}

  uint32_t String(const std::string& s) {
    auto [it, added] = strings_.try_emplace(s, static_cast<uint32_t>(string_list_.size()));
    if (added) string_list_.push_back(s);
    return it->second;
  }

  // Index of stack `id` in the page's stack table; -1 for no stack.
  int64_t Stack(uint64_t id) {
    auto it = stacks_.find(id);
    if (it != stacks_.end()) return it->second;
    const std::vector<Frame> frames = resolver_.ResolveStack(id, kMaxFrames);
    std::vector<uint32_t> root_first;
    for (auto f = frames.rbegin(); f != frames.rend(); ++f) root_first.push_back(FrameIndex(*f));
    const StackKeyInfo& info = grouper_.Describe(id);
    int64_t group = -1;
    if (info.key.kind != GroupKey::Kind::kStack) group = FrameIndex(resolver_.ResolvePc(info.key.value));
    const int64_t index = static_cast<int64_t>(stack_list_.size());
    stack_list_.push_back({std::move(root_first), group, info.key.kind == GroupKey::Kind::kFallback});
    stacks_[id] = index;
    return index;
  }

  void WriteTables(JsonWriter& w) {
    // Stacks first: they may add frames, frames add strings.
    w.Key("stacks");
    w.BeginArray();
    for (const StackEntry& s : stack_list_) {
      w.BeginArray();
      for (uint32_t f : s.frames) w.Uint(f);
      w.EndArray();
    }
    w.EndArray();
    w.Key("stack_groups");  // per stack: the frame it is grouped by (-1: the stack itself), and "no user frame"
    w.BeginArray();
    for (const StackEntry& s : stack_list_) {
      w.BeginArray();
      w.Int(s.group);
      w.Int(s.fallback ? 1 : 0);
      w.EndArray();
    }
    w.EndArray();
    w.Key("frames");  // [function, file, line, module, kind (0 native, 1 Python, 2 marker), user (1/0)]
    w.BeginArray();
    for (const FrameEntry& f : frame_list_) {
      w.BeginArray();
      w.Uint(f.function);
      w.Uint(f.file);
      w.Uint(f.line);
      w.Uint(f.module);
      w.Uint(f.kind);
      w.Uint(f.user ? 1 : 0);
      w.EndArray();
    }
    w.EndArray();
    w.Key("strings");
    w.BeginArray();
    for (const std::string& s : string_list_) w.String(s);
    w.EndArray();
  }

 private:
  struct FrameEntry {
    uint32_t function, file, line, module, kind;
    bool user;
  };
  struct StackEntry {
    std::vector<uint32_t> frames;
    int64_t group;
    bool fallback;
  };

  uint32_t FrameIndex(const Frame& f) {
    const std::string key = SymbolicKey(f);
    auto [it, added] = frames_.try_emplace(key, static_cast<uint32_t>(frame_list_.size()));
    if (added) {
      const uint32_t kind = f.kind == FrameKind::kPython ? 1 : f.kind == FrameKind::kNoPython ? 2 : 0;
      const bool user = grouper_.ClassOf(f.pc) == FrameClass::kUser;
      frame_list_.push_back({String(f.function), String(std::string(ShortPath(f.file))), f.line,
                             String(std::string(Basename(f.module))), kind, user});
    }
    return it->second;
  }

  FrameResolver resolver_;
  StackGrouper grouper_;
  absl::flat_hash_map<std::string, uint32_t> strings_;
  std::vector<std::string> string_list_;
  absl::flat_hash_map<std::string, uint32_t> frames_;
  std::vector<FrameEntry> frame_list_;
  absl::flat_hash_map<uint64_t, int64_t> stacks_;
  std::vector<StackEntry> stack_list_;
};

void WriteUints(JsonWriter& w, const std::vector<uint64_t>& v) {
  w.BeginArray();
  for (uint64_t x : v) w.Uint(x);
  w.EndArray();
}

// A snapshot scope: total, count, its largest stacks [stack, bytes, count] and the rest [bytes, count].
void WriteScope(JsonWriter& w, Interner& in, int32_t device, int series, const GroupedSnapshot& s, size_t cap) {
  w.BeginObject();
  w.Member("device", device);
  w.Member("kind", SeriesName(series));
  w.Member("total", s.total_bytes);
  w.Member("count", s.total_count);
  w.Key("stacks");
  w.BeginArray();
  uint64_t bytes = 0, count = 0;
  const size_t n = std::min(cap, s.groups.size());
  for (size_t i = 0; i < n; ++i) {
    const StackGroup& g = s.groups[i];
    w.BeginArray();
    w.Int(in.Stack(g.stack));
    w.Uint(g.bytes);
    w.Uint(g.count);
    w.EndArray();
    bytes += g.bytes;
    count += g.count;
  }
  w.EndArray();
  w.Key("other");
  w.BeginArray();
  w.Uint(s.total_bytes - std::min(bytes, s.total_bytes));
  w.Uint(s.total_count - std::min(count, s.total_count));
  w.EndArray();
  w.Member("stacks_in_all", static_cast<uint64_t>(s.group_count));
  w.EndObject();
}

void WriteSeries(JsonWriter& w, const History& h) {
  w.Key("series");
  w.BeginArray();
  for (const BucketedSeries& s : h.series) {
    w.BeginObject();
    w.Member("device", s.device);
    w.Member("kind", SeriesName(s.series));
    w.Key("min");
    WriteUints(w, s.min);
    w.Key("max");
    WriteUints(w, s.max);
    // Per owner: its bytes when each bucket's max was reached (null: the owner never held memory here).
    w.Key("owners");
    w.BeginArray();
    for (size_t o = 0; o < h.owners.size(); ++o) {
      bool any = false;
      for (const auto& at : s.owners_at_max) any = any || (o < at.size() && at[o] != 0);
      if (!any) {
        w.Null();
        continue;
      }
      w.BeginArray();
      for (const auto& at : s.owners_at_max) w.Uint(o < at.size() ? at[o] : 0);
      w.EndArray();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

std::string HtmlData(const Analysis& a, const History& h, const HtmlDataOptions& options, const HtmlExtras& extras) {
  Interner in(a, options.grouping);
  std::string out;
  JsonWriter w(&out);
  const TraceInfo& info = a.info;
  w.BeginObject();
  w.Member("version", 2);
  w.Key("diagnosis");
  w.BeginArray();
  for (const std::string& line : extras.diagnosis) w.String(line);
  w.EndArray();
  w.Key("info");
  w.BeginObject();
  w.Member("path", info.path);
  w.Key("argv");
  w.BeginArray();
  for (const std::string& s : info.header.argv) w.String(s);
  w.EndArray();
  w.Member("pid", info.header.pid);
  w.Member("host", info.header.hostname);
  w.Member("executable", info.header.executable);
  w.Member("tool_version", info.header.tool_version);
  w.Member("start_unix_ns", info.header.start_unix_time_ns);
  w.Member("duration_ns", info.DurationNs());
  w.Member("events", a.model.events);
  w.Member("clean_end", info.has_trailer);
  w.Member("truncated", info.stats.truncated);
  w.Member("group_by", GroupingName(options.grouping));
  w.EndObject();

  w.Key("devices");
  w.BeginArray();
  for (const auto& [ordinal, d] : info.devices) {
    w.BeginObject();
    w.Member("device", ordinal);
    w.Member("name", d.name);
    w.Member("total_memory", d.total_memory);
    w.EndObject();
  }
  w.EndArray();

  w.Member("buckets", h.buckets);
  w.Member("bucket_ns", h.bucket_ns);
  w.Key("owner_names");
  w.BeginArray();
  for (const OwnerName& o : h.owners) w.String(o.display_name);
  w.EndArray();
  WriteSeries(w, h);

  w.Key("driver");
  w.BeginArray();
  for (const DriverPoint& p : h.driver) {
    w.BeginArray();
    w.Int(p.device);
    w.Int(p.time_ns);
    w.Uint(p.used_bytes);
    w.Uint(p.total_bytes);
    w.EndArray();
  }
  w.EndArray();

  // Snapshots: evenly spaced moments, then each peak of a device total or host memory, then failed allocations.
  std::vector<std::string> caps;
  w.Key("snapshots");
  w.BeginArray();
  for (const Moment& m : h.moments) {
    w.BeginObject();
    w.Member("t", m.time_ns);
    w.Member("what", "moment");
    w.Key("scopes");
    w.BeginArray();
    for (const MomentScope& s : m.scopes) WriteScope(w, in, s.device, s.series, s.live, options.snapshot_stacks);
    w.EndArray();
    w.EndObject();
  }
  size_t next_snapshot = h.moments.size();
  std::vector<std::pair<const PeakResult*, size_t>> peak_snapshots;
  for (const PeakResult& p : a.peaks) {
    const bool drawn = p.series == kDeviceTotalSeries || IsHostMemory(static_cast<format::Kind>(p.series));
    if (!drawn || !p.at_peak.taken) continue;
    w.BeginObject();
    w.Member("t", info.Relative(p.counter.peak.time_ns));
    w.Member("what", "peak");
    w.Key("scopes");
    w.BeginArray();
    WriteScope(w, in, p.device, p.series, p.at_peak, options.snapshot_stacks);
    w.EndArray();
    w.EndObject();
    peak_snapshots.push_back({&p, next_snapshot++});
  }
  std::vector<size_t> oom_snapshot(std::min(a.ooms.size(), options.ooms), SIZE_MAX);
  for (size_t i = 0; i < oom_snapshot.size(); ++i) {
    const OomRecord& r = a.ooms[i];
    if (!r.live_by_stack.taken) continue;
    w.BeginObject();
    w.Member("t", info.Relative(r.event.time_ns));
    w.Member("what", "oom");
    w.Key("scopes");
    w.BeginArray();
    const bool host = r.scope.scope == SnapshotFilter::Scope::kHostMemory;
    WriteScope(w, in, host ? format::kHostDevice : r.scope.device,
               host ? static_cast<int>(format::Kind::kPinnedHost) : r.scope.series, r.live_by_stack,
               options.snapshot_stacks);
    w.EndArray();
    w.EndObject();
    oom_snapshot[i] = next_snapshot++;
  }
  w.EndArray();

  w.Key("peaks");
  w.BeginArray();
  for (const PeakResult& p : a.peaks) {
    w.BeginObject();
    w.Member("device", p.device);
    w.Member("kind", SeriesName(p.series));
    w.Member("t", info.Relative(p.counter.peak.time_ns));
    w.Member("bytes", p.counter.peak_bytes);
    w.Member("count", p.counter.peak_count);
    w.Member("final", p.counter.bytes);
    int64_t snap = -1;
    for (const auto& [peak, index] : peak_snapshots) {
      if (peak == &p) snap = static_cast<int64_t>(index);
    }
    w.Member("snapshot", snap);
    w.EndObject();
  }
  w.EndArray();

  // The program's phases (NVTX ranges), drawn as bands behind the timeline: the outermost ranges of each thread,
  // the first kMaxPhaseBands of them.
  w.Key("phases");
  w.BeginArray();
  size_t bands = 0;
  for (const PhaseRange& range : a.phases.ranges) {
    if (range.path != range.name || bands == kMaxPhaseBands) continue;
    ++bands;
    w.BeginObject();
    w.Member("name", range.name);
    w.Member("t0", info.Relative(range.begin_ns));
    w.Member("t1", info.Relative(range.end_ns));
    w.EndObject();
  }
  w.EndArray();

  w.Key("ooms");
  w.BeginArray();
  for (size_t i = 0; i < oom_snapshot.size(); ++i) {
    const OomRecord& r = a.ooms[i];
    const Event& e = r.event;
    w.BeginObject();
    w.Member("t", info.Relative(e.time_ns));
    w.Member("device", e.device);
    w.Member("kind", format::KindName(e.info->kind));
    w.Member("api", e.info->name);
    w.Member("bytes", e.size);
    w.Member("error", CudaErrorString(e.result));
    w.Member("has_mem_info", e.has_mem_info);
    w.Member("free", e.free_bytes);
    w.Member("total", e.total_bytes);
    w.Member("live", r.live_bytes);
    w.Member("thread", info.ThreadName(e.thread));
    w.Member("stack", in.Stack(e.stack));
    w.Member("snapshot", oom_snapshot[i] == SIZE_MAX ? int64_t{-1} : static_cast<int64_t>(oom_snapshot[i]));
    w.EndObject();
  }
  w.EndArray();
  w.Member("oom_count", a.oom_count);
  if (a.oom_count > oom_snapshot.size()) {
    caps.push_back(absl::StrCat("the first ", oom_snapshot.size(), " of ", a.oom_count, " failed allocations are marked"));
  }

  w.Key("leaks");
  w.BeginArray();
  size_t listed = 0;
  for (const LeakGroup& g : a.leaks) {
    if (!IsMemoryKind(g.kind)) continue;
    if (listed++ == options.leaks) {
      caps.push_back(absl::StrCat("the largest ", options.leaks, " stacks live at the end are listed"));
      break;
    }
    w.BeginObject();
    w.Member("device", g.device);
    w.Member("kind", format::KindName(g.kind));
    w.Member("bytes", g.bytes);
    w.Member("count", g.count);
    w.Key("growth");
    w.BeginArray();
    for (uint64_t b : g.growth) w.Uint(b);
    w.EndArray();
    w.Member("stack", in.Stack(g.stack));
    w.EndObject();
  }
  w.EndArray();

  w.Key("pinned");
  w.BeginObject();
  w.Member("computed", a.pinned.computed);
  w.Member("peak", a.pinned.peak_bytes);
  w.Member("peak_t", a.pinned.peak_time_ns);
  w.Member("allocations", a.pinned.allocations);
  w.Member("allocated", a.pinned.allocated_bytes);
  std::vector<const PinnedWindow*> windows;
  for (const PinnedWindow& pw : a.pinned.windows) {
    if (pw.rise_bytes > 0) windows.push_back(&pw);
  }
  std::stable_sort(windows.begin(), windows.end(),
                   [](const PinnedWindow* x, const PinnedWindow* y) { return x->rise_bytes > y->rise_bytes; });
  if (windows.size() > options.pinned_windows) windows.resize(options.pinned_windows);
  w.Key("spikes");
  w.BeginArray();
  for (const PinnedWindow* pw : windows) {
    w.BeginObject();
    w.Member("start", pw->start_ns);
    w.Member("end", pw->end_ns);
    w.Member("rise", pw->rise_bytes);
    w.Member("max", pw->max_bytes);
    w.Member("thread", info.ThreadName(pw->top_thread));
    w.Member("thread_index", pw->top_thread);
    w.Member("thread_bytes", pw->top_allocated_bytes);
    w.Member("stack", pw->top_allocated_bytes == 0 ? int64_t{-1} : in.Stack(pw->top_stack));
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();

  WriteOwnersJson(w, a.owners, a.driver_memory);  // the public names (docs/json.md, summary)
  if (h.driver_dropped > 0) {
    caps.push_back(absl::StrCat("the first ", h.driver.size(), " driver samples are drawn (", h.driver_dropped,
                                " more in the trace)"));
  }

  w.Key("health");
  w.BeginObject();
  w.Member("events", a.model.events);
  w.Member("allocations", a.model.allocations);
  w.Member("frees", a.model.frees);
  w.Member("unmatched_frees", a.model.unmatched_frees);
  w.Member("overwritten", a.model.overwritten);
  w.Member("failed_allocations", a.model.failed_allocations);
  w.Member("dropped_events", info.trailer.dropped_events);
  w.Member("unwind_failures", info.trailer.unwind_failures);
  w.Member("truncated_stacks", info.trailer.truncated_stacks);
  w.Member("python_failures", info.trailer.python_failures);
  w.Member("recorder_time_ns", info.trailer.recorder_time_ns);
  w.Member("bytes_written", info.trailer.bytes_written);
  w.Key("notices");
  w.BeginArray();
  for (const NoticeInfo& n : info.notices) w.String(n.message);
  w.EndArray();
  w.EndObject();

  caps.push_back(absl::StrCat("timelines drawn from ", h.buckets, " buckets each (min and max exact per bucket)"));
  caps.push_back(absl::StrCat("each snapshot lists its largest ", options.snapshot_stacks,
                              " stacks; the rest is one 'other' entry"));
  w.Key("caps");
  w.BeginArray();
  for (const std::string& c : caps) w.String(c);
  w.EndArray();
  in.WriteTables(w);
  w.EndObject();
  if (!extras.allocator_json.empty()) {
    // A complete JSON value written by the allocator layer, as the last member.
    out.pop_back();
    absl::StrAppend(&out, ",\"allocator\":", extras.allocator_json, "}");
  }
  return out;
}

}  // namespace cumemtrace::analyzer
