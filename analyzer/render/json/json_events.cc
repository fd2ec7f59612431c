// The events dump as streamed JSON. Must never hold the events: each is written and flushed as it comes.
#include "analyzer/render/json/json_events.h"

#include "analyzer/render/json/json_common.h"

namespace cumemtrace::analyzer {

JsonEventSink::JsonEventSink(BufferedOutput& out) : out_(out), writer_(out.buffer(), 0) {
  writer_.BeginObject();
  writer_.Key("events");
  writer_.BeginArray();
}

void JsonEventSink::Row(const EventRow& r) {
  JsonWriter& w = writer_;
  out_.buffer()->push_back('\n');  // one event per line: greppable, and diff-friendly
  w.BeginObject();
  w.Member("seq", r.seq);
  w.Member("time_ns", r.time_ns);
  w.Member("op", r.op);
  w.Member("api", r.api);
  w.Member("kind", r.kind);
  w.Member("device", r.device);
  w.Member("address", HexString(r.address));
  w.Key("size");
  if (r.has_size) {
    w.Uint(r.size);
  } else {
    w.Null();
  }
  w.Key("stream");
  if (r.has_stream) {
    w.String(HexString(r.stream));
  } else {
    w.Null();
  }
  w.Key("aux");
  if (r.has_aux) {
    w.String(HexString(r.aux));
  } else {
    w.Null();
  }
  w.Member("thread", r.thread);
  w.Member("thread_name", *r.thread_name);
  w.Member("result", r.result);
  w.Member("stack_id", r.stack_id);
  w.Member("cupti_only", r.cupti_only);
  if (r.grad != format::GradMode::kUnknown) w.Member("grad_mode", r.grad == format::GradMode::kRecording);
  w.EndObject();
  out_.MaybeFlush();
}

void JsonEventSink::End(const TraceInfo& info, const ModelStats& model) {
  out_.buffer()->push_back('\n');
  writer_.EndArray();
  Overview overview{&info, model};
  WriteOverview(writer_, overview, "events");
  writer_.EndObject();
  out_.buffer()->push_back('\n');
  out_.Flush();
}

}  // namespace cumemtrace::analyzer
