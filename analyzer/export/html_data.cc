// HtmlData: interns strings, frames and stacks while writing the timelines, snapshots and tables, then writes
// the interned tables last (the page reads the whole document before drawing, so order does not matter).
#include "analyzer/export/html_data.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "analyzer/model/memory/timelines.h"
#include "analyzer/model/stacks/frame_class.h"
#include "analyzer/render/json/json_owners.h"
#include "analyzer/render/json/json_writer.h"
#include "analyzer/reports/symbolic_frame.h"

namespace cumemtrace::analyzer {
namespace {

class Interner {
 public:
  explicit Interner(const absl::flat_hash_map<uint64_t, PageStack>& stacks) : catalog_(stacks) {}

  uint32_t String(const std::string& s) {
    auto [it, added] = strings_.try_emplace(s, static_cast<uint32_t>(string_list_.size()));
    if (added) string_list_.push_back(s);
    return it->second;
  }

  // Index of stack `id` in the page's stack table; -1 for no stack.
  int64_t Stack(uint64_t id) {
    auto it = stacks_.find(id);
    if (it != stacks_.end()) return it->second;
    static const PageStack kUnknown;  // never: the report resolves every stack it refers to
    auto page = catalog_.find(id);
    const PageStack& stack = page != catalog_.end() ? page->second : kUnknown;
    std::vector<uint32_t> root_first;
    for (auto f = stack.frames.rbegin(); f != stack.frames.rend(); ++f) root_first.push_back(FrameIndex(*f));
    const int64_t group = stack.group.has_value() ? int64_t{FrameIndex(*stack.group)} : int64_t{-1};
    const int64_t index = static_cast<int64_t>(stack_list_.size());
    stack_list_.push_back({std::move(root_first), group, stack.fallback});
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

  uint32_t FrameIndex(const PageFrame& page) {
    const Frame& f = page.frame;
    const std::string key = SymbolicKey(f);
    auto [it, added] = frames_.try_emplace(key, static_cast<uint32_t>(frame_list_.size()));
    if (added) {
      const uint32_t kind = f.kind == FrameKind::kPython ? 1 : f.kind == FrameKind::kNoPython ? 2 : 0;
      frame_list_.push_back({String(f.function), String(std::string(ShortPath(f.file))), f.line,
                             String(std::string(Basename(f.module))), kind, page.user});
    }
    return it->second;
  }

  const absl::flat_hash_map<uint64_t, PageStack>& catalog_;
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

void WriteSeries(JsonWriter& w, const History& h) {  // the timelines, as History buckets them
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

std::string HtmlData(const PageReport& r, const HtmlExtras& extras) {
  Interner in(r.stacks);
  const TraceInfo& info = *r.info;
  const History& h = *r.history;
  std::string out;
  JsonWriter w(&out);
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
  w.Member("events", r.model->events);
  w.Member("clean_end", info.has_trailer);
  w.Member("truncated", info.stats.truncated);
  w.Member("group_by", r.group_by);
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

  w.Key("snapshots");
  w.BeginArray();
  for (const PageSnapshot& s : r.snapshots) {
    w.BeginObject();
    w.Member("t", s.time_ns);
    w.Member("what", s.what);
    w.Key("scopes");
    w.BeginArray();
    for (const PageScope& scope : s.scopes) {
      WriteScope(w, in, scope.device, scope.series, *scope.live, r.snapshot_stacks);
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();

  w.Key("peaks");
  w.BeginArray();
  for (const PagePeak& p : r.peaks) {
    w.BeginObject();
    w.Member("device", p.device);
    w.Member("kind", SeriesName(p.series));
    w.Member("t", p.time_ns);
    w.Member("bytes", p.bytes);
    w.Member("count", p.count);
    w.Member("final", p.final_bytes);
    w.Member("snapshot", p.snapshot);
    w.EndObject();
  }
  w.EndArray();

  w.Key("phases");
  w.BeginArray();
  for (const PagePhaseBand& band : r.phases) {
    w.BeginObject();
    w.Member("name", band.name);
    w.Member("t0", band.begin_ns);
    w.Member("t1", band.end_ns);
    w.EndObject();
  }
  w.EndArray();

  w.Key("ooms");
  w.BeginArray();
  for (const PageOom& o : r.ooms) {
    w.BeginObject();
    w.Member("t", o.time_ns);
    w.Member("device", o.device);
    w.Member("kind", o.kind);
    w.Member("api", o.api);
    w.Member("bytes", o.bytes);
    w.Member("error", o.error);
    w.Member("has_mem_info", o.has_mem_info);
    w.Member("free", o.free_bytes);
    w.Member("total", o.total_bytes);
    w.Member("live", o.live_bytes);
    w.Member("thread", o.thread);
    w.Member("stack", in.Stack(o.stack));
    w.Member("snapshot", o.snapshot);
    w.EndObject();
  }
  w.EndArray();
  w.Member("oom_count", r.oom_count);

  w.Key("leaks");
  w.BeginArray();
  for (const PageLeak& g : r.leaks) {
    w.BeginObject();
    w.Member("device", g.device);
    w.Member("kind", g.kind);
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

  const PinnedResult& pinned = *r.pinned;
  w.Key("pinned");
  w.BeginObject();
  w.Member("computed", pinned.computed);
  w.Member("peak", pinned.peak_bytes);
  w.Member("peak_t", pinned.peak_time_ns);
  w.Member("allocations", pinned.allocations);
  w.Member("allocated", pinned.allocated_bytes);
  w.Key("spikes");
  w.BeginArray();
  for (const PageSpike& s : r.spikes) {
    w.BeginObject();
    w.Member("start", s.start_ns);
    w.Member("end", s.end_ns);
    w.Member("rise", s.rise_bytes);
    w.Member("max", s.max_bytes);
    w.Member("thread", s.thread);
    w.Member("thread_index", s.thread_index);
    w.Member("thread_bytes", s.thread_bytes);
    w.Member("stack", s.stack.has_value() ? in.Stack(*s.stack) : int64_t{-1});
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();

  WriteOwnersJson(w, *r.owners, *r.driver_memory);  // the public names (docs/json.md, summary)

  w.Key("health");
  w.BeginObject();
  w.Member("events", r.model->events);
  w.Member("allocations", r.model->allocations);
  w.Member("frees", r.model->frees);
  w.Member("unmatched_frees", r.model->unmatched_frees);
  w.Member("overwritten", r.model->overwritten);
  w.Member("failed_allocations", r.model->failed_allocations);
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

  w.Key("caps");
  w.BeginArray();
  for (const std::string& c : r.caps) w.String(c);
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
