// TorchSnapshotPickle / TorchSnapshotJson: one walk over the snapshot, templated on the writer, so that both files
// hold exactly the same dictionary.
#include "analyzer/export/export_torch_snapshot.h"

#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analyzer/model/stacks/frame_resolver.h"
#include "analyzer/render/json/json_writer.h"
#include "analyzer/export/pickle_writer.h"
#include "analyzer/render/text/text_common.h"

namespace cumemtrace::analyzer {
namespace {

// JsonWriter under PickleWriter's names.
class JsonSink {
 public:
  explicit JsonSink(std::string* out) : w_(out) {}
  void BeginDict() { w_.BeginObject(); }
  void EndDict() { w_.EndObject(); }
  void BeginList() { w_.BeginArray(); }
  void EndList() { w_.EndArray(); }
  void Key(absl::string_view key) { w_.Key(key); }
  void String(absl::string_view value) { w_.String(value); }
  void Int(int64_t value) { w_.Int(value); }
  void Uint(uint64_t value) { w_.Uint(value); }
  void Bool(bool value) { w_.Bool(value); }
  void None() { w_.Null(); }
  void IntPair(int64_t a, int64_t b) {
    w_.BeginArray();
    w_.Int(a);
    w_.Int(b);
    w_.EndArray();
  }

 private:
  JsonWriter w_;
};

const char* ActionName(TraceAction action) {
  switch (action) {
    case TraceAction::kAlloc: return "alloc";
    case TraceAction::kFreeRequested: return "free_requested";
    case TraceAction::kFreeCompleted: return "free_completed";
    case TraceAction::kSegmentAlloc: return "segment_alloc";
    case TraceAction::kSegmentFree: return "segment_free";
    case TraceAction::kSegmentMap: return "segment_map";
    case TraceAction::kSegmentUnmap: return "segment_unmap";
    case TraceAction::kOom: return "oom";
  }
  return "unknown";
}

const char* StateName(BlockState state) {
  switch (state) {
    case BlockState::kActiveAllocated: return "active_allocated";
    case BlockState::kActivePendingFree: return "active_pending_free";
    case BlockState::kInactive: return "inactive";
  }
  return "inactive";
}

template <typename W>
class SnapshotEmitter {
 public:
  SnapshotEmitter(const TorchSnapshot& s, W& w) : s_(s), w_(w), resolver_(s.stacks, s.symbols, s.python_frames) {}

  void Emit() {
    w_.BeginDict();
    w_.Key("segments");
    w_.BeginList();
    for (const SnapshotSegment& seg : s_.segments) Segment(seg);
    w_.EndList();
    w_.Key("device_traces");
    w_.BeginList();
    for (const std::vector<SnapshotTraceEntry>& trace : s_.device_traces) {
      w_.BeginList();
      for (const SnapshotTraceEntry& e : trace) Entry(e);
      w_.EndList();
    }
    w_.EndList();
    w_.EndDict();
  }

 private:
  static constexpr bool kMemo = std::is_same_v<W, PickleWriter>;

  void Segment(const SnapshotSegment& seg) {
    w_.BeginDict();
    w_.Key("device");
    w_.Int(seg.device);
    w_.Key("address");
    w_.Uint(seg.address);
    w_.Key("total_size");
    w_.Uint(seg.total_size);
    w_.Key("allocated_size");
    w_.Uint(seg.allocated_size);
    w_.Key("active_size");
    w_.Uint(seg.active_size);
    w_.Key("requested_size");
    w_.Uint(seg.requested_size);
    w_.Key("stream");
    w_.Uint(seg.stream);
    w_.Key("segment_type");
    w_.String(seg.large ? "large" : "small");
    w_.Key("segment_pool_id");
    w_.IntPair(0, 0);
    w_.Key("is_expandable");
    w_.Bool(seg.is_expandable);
    w_.Key("frames");
    Frames(seg.stack);
    w_.Key("blocks");
    w_.BeginList();
    for (const SnapshotBlock& b : seg.blocks) {
      w_.BeginDict();
      w_.Key("address");
      w_.Uint(b.address);
      w_.Key("size");
      w_.Uint(b.size);
      w_.Key("requested_size");
      w_.Uint(b.requested_size);
      w_.Key("state");
      w_.String(StateName(b.state));
      w_.Key("frames");
      Frames(b.stack);
      w_.EndDict();
    }
    w_.EndList();
    w_.EndDict();
  }

  void Entry(const SnapshotTraceEntry& e) {
    w_.BeginDict();
    w_.Key("action");
    w_.String(ActionName(e.action));
    w_.Key(e.action == TraceAction::kOom ? "device_free" : "addr");
    w_.Uint(e.addr);
    w_.Key("size");
    w_.Uint(e.size);
    w_.Key("stream");
    w_.Uint(e.stream);
    w_.Key("time_us");
    w_.Int(e.time_us);
    w_.Key("frames");
    Frames(e.stack);
    w_.EndDict();
  }

  void Frame(uint64_t pc) {
    if constexpr (kMemo) {
      if (auto it = frame_memo_.find(pc); it != frame_memo_.end()) {
        w_.Get(it->second);
        return;
      }
    }
    const analyzer::Frame& f = resolver_.ResolvePc(pc);
    w_.BeginDict();
    w_.Key("filename");
    if (f.kind == FrameKind::kPython) {
      w_.String(f.file.empty() ? "??" : f.file);
    } else {
      w_.String(!f.file.empty() ? f.file : !f.module.empty() ? f.module : "??");
    }
    w_.Key("line");
    w_.Int(f.line);
    w_.Key("name");
    w_.String(f.function_known ? f.function : f.kind == FrameKind::kPython ? f.function : FrameLocation(f));
    w_.EndDict();
    if constexpr (kMemo) frame_memo_[pc] = w_.Memoize();
  }

  void Frames(uint64_t stack) {
    if constexpr (kMemo) {
      if (auto it = stack_memo_.find(stack); it != stack_memo_.end()) {
        w_.Get(it->second);
        return;
      }
    }
    w_.BeginList();
    for (uint64_t pc : s_.stacks.Pcs(stack)) {
      if (format::IsPythonFramePc(pc) && format::PythonFrameIdOfPc(pc) == format::kNoPythonFramesId) continue;
      Frame(pc);
    }
    w_.EndList();
    if constexpr (kMemo) stack_memo_[stack] = w_.Memoize();
  }

  const TorchSnapshot& s_;
  W& w_;
  FrameResolver resolver_;
  absl::flat_hash_map<uint64_t, uint32_t> frame_memo_;  // pc -> memo id of its frame dict
  absl::flat_hash_map<uint64_t, uint32_t> stack_memo_;  // stack id -> memo id of its frame list
};

}  // namespace

std::string TorchSnapshotPickle(const TorchSnapshot& snapshot) {
  std::string out;
  PickleWriter w(&out);
  SnapshotEmitter<PickleWriter>(snapshot, w).Emit();
  w.Finish();
  return out;
}

std::string TorchSnapshotJson(const TorchSnapshot& snapshot) {
  std::string out;
  JsonSink w(&out);
  SnapshotEmitter<JsonSink>(snapshot, w).Emit();
  out.push_back('\n');
  return out;
}

namespace {

std::string EstimateWarning(const SnapshotEstimates& e) {
  if (!e.any()) return "";
  std::vector<std::string> why;
  if (e.estimated_blocks != 0) {
    why.push_back(Plural(e.estimated_blocks, "active block estimated", "active blocks estimated"));
  }
  if (e.mismatches != 0) {
    why.push_back(Plural(e.mismatches, "event the layout disagreed with", "events the layout disagreed with"));
  }
  if (!e.unmodelled.empty()) {
    std::vector<std::string> settings;
    for (const std::string& setting : e.unmodelled) settings.push_back(Printable(setting));
    why.push_back(absl::StrCat("settings not modelled: ", absl::StrJoin(settings, ", ")));
  }
  if (e.attached_late) why.push_back("tracker attached after the allocator's first segment");
  return absl::StrCat("warning: block sizes in the snapshot's segments are estimates (", absl::StrJoin(why, "; "),
                      ")\n");
}

}  // namespace

std::string TorchSnapshotWarnings(const TorchSnapshot& s) {
  std::string out;
  if (s.unmatched_frees != 0 || s.stray_blocks != 0) {
    absl::StrAppend(&out, "warning: left out of the snapshot: ", s.unmatched_frees,
                    " frees of blocks never allocated in the trace, ", s.stray_blocks,
                    " live blocks outside every segment\n");
  }
  if (s.foreign_device_events != 0) {
    absl::StrAppend(&out, "warning: left out of the snapshot: ", s.foreign_device_events,
                    " PyTorch allocator events of devices above ", kMaxTorchDevice,
                    " (PyTorch's largest device index; the trace is damaged)\n");
  }
  absl::StrAppend(&out, EstimateWarning(s.estimates));
  return out;
}

}  // namespace cumemtrace::analyzer
