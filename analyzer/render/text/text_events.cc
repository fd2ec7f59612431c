// The events dump as aligned text lines, streamed. Must never hold the events.
#include "analyzer/render/text/text_events.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/model/memory/cuda_errors.h"
#include "analyzer/render/text/text_common.h"

namespace cumemtrace::analyzer {

TextEventSink::TextEventSink(BufferedOutput& out) : out_(out) {
  absl::StrAppendFormat(out_.buffer(), "%10s %15s %-5s %-23s %-15s %6s %18s %14s %14s %14s %-20s %-s\n", "seq",
                        "time_ns", "op", "api", "kind", "device", "address", "size", "stream", "aux", "thread",
                        "result stack");
}

void TextEventSink::Row(const EventRow& r) {
  std::string* b = out_.buffer();
  const std::string size = r.has_size ? absl::StrCat(r.size) : std::string("-");
  const std::string stream = r.has_stream ? absl::StrFormat("0x%x", r.stream) : std::string("-");
  const std::string aux = r.has_aux ? absl::StrFormat("0x%x", r.aux) : std::string("-");
  const std::string thread = ThreadLabel(r.thread, *r.thread_name);
  const char* error = r.result == 0 ? "ok" : CudaErrorName(r.result);
  absl::StrAppendFormat(b, "%10d %15d %-5s %-23s %-15s %6d %18s %14s %14s %14s %-20s ", r.seq, r.time_ns, r.op,
                        r.api, r.kind, r.device, absl::StrFormat("0x%x", r.address), size, stream, aux, thread);
  if (error != nullptr) {
    absl::StrAppend(b, error);
  } else {
    absl::StrAppend(b, "error ", r.result);
  }
  absl::StrAppendFormat(b, " #%d\n", r.stack_id);
  out_.MaybeFlush();
}

void TextEventSink::End(const TraceInfo& info, const ModelStats&) {
  absl::StrAppendFormat(out_.buffer(), "%d events\n", info.stats.events);
  out_.Flush();
}

}  // namespace cumemtrace::analyzer
