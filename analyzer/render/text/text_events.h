// The events dump as text: a header line, then one aligned line per event.
#ifndef CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_EVENTS_H_
#define CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_EVENTS_H_

#include "analyzer/render/output.h"
#include "analyzer/model/memory/event_stream.h"

namespace cumemtrace::analyzer {

class TextEventSink : public EventSink {
 public:
  explicit TextEventSink(BufferedOutput& out);
  void Row(const EventRow& row) override;
  void End(const TraceInfo& info, const ModelStats& model) override;

 private:
  BufferedOutput& out_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_TEXT_TEXT_EVENTS_H_
