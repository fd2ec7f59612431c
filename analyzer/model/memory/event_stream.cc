// The event stream: replays the memory model only to name what each free freed. Must never buffer rows.
#include "analyzer/model/memory/event_stream.h"

namespace cumemtrace::analyzer {
namespace {

class EventsVisitor : public TraceVisitor {
 public:
  EventsVisitor(TraceInfo& info, EventSink& sink) : info_(info), sink_(sink) {}

  void OnHeader(const TraceHeader& header) override { info_.header = header; }
  void OnDevice(const DeviceInfo& device) override { info_.devices[device.ordinal] = device; }
  void OnThread(const ThreadInfo& thread) override { info_.threads[thread.index] = thread; }
  void OnTrailer(const TrailerInfo& trailer) override {
    info_.has_trailer = true;
    info_.trailer = trailer;
  }
  void OnEvent(const Event& e) override {
    const Outcome outcome = model_.Apply(e);
    info_.NoteEventTime(e.time_ns);
    EventRow row;
    row.seq = e.seq;
    row.time_ns = info_.Relative(e.time_ns);
    row.api = e.info->name;
    row.device = e.device;
    row.address = e.address;
    if (e.info->op == format::Op::kAlloc) {
      row.op = "alloc";
      row.kind = format::KindName(e.info->kind);
      row.has_size = true;
      row.size = e.size;
    } else {
      row.op = e.info->op == format::Op::kFree ? "free" : "none";
      if (outcome.has_previous) {
        row.kind = format::KindName(outcome.previous.kind);
        row.has_size = true;
        row.size = outcome.previous.size;
      } else if (e.info->has_size) {  // the torch.* apis that carry a size of their own (segments, OOM)
        row.has_size = true;
        row.size = e.size;
      }
    }
    row.has_stream = e.info->has_stream;
    row.stream = e.stream;
    row.has_aux = e.info->has_aux;
    row.aux = e.aux;
    row.thread = e.thread;
    row.thread_name = &info_.ThreadName(e.thread);
    row.result = e.result;
    row.cupti_only = e.cupti_only;
    row.grad = format::GradModeOf(e.api);
    row.stack_id = e.stack;
    sink_.Row(row);
  }

  const ModelStats& stats() const { return model_.stats(); }

 private:
  TraceInfo& info_;
  EventSink& sink_;
  MemoryModel model_;
};

}  // namespace

absl::Status StreamEvents(const std::string& path, EventSink& sink, TraceInfo* info) {
  info->path = path;
  EventsVisitor visitor(*info, sink);
  if (absl::Status s = ReadTrace(path, visitor, &info->stats); !s.ok()) return s;
  sink.End(*info, visitor.stats());
  return absl::OkStatus();
}

}  // namespace cumemtrace::analyzer
