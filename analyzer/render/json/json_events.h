// The events dump as one JSON object: {"events": [...], then the overview}. Events stream out as they are read;
// the overview follows them because the trailer comes last.
#ifndef CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_EVENTS_H_
#define CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_EVENTS_H_

#include "analyzer/render/json/json_writer.h"
#include "analyzer/render/output.h"
#include "analyzer/model/memory/event_stream.h"

namespace cumemtrace::analyzer {

class JsonEventSink : public EventSink {
 public:
  explicit JsonEventSink(BufferedOutput& out);
  void Row(const EventRow& row) override;
  void End(const TraceInfo& info, const ModelStats& model) override;

 private:
  BufferedOutput& out_;
  JsonWriter writer_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_JSON_JSON_EVENTS_H_
