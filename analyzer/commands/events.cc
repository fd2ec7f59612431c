// `cumem-analyze events TRACE.pb [--json]`: every event in sequence order. The rows are streamed (a trace of a
// billion events does not fit in memory) into an unnamed temporary file, and copied to stdout only once the whole
// trace was read without error: a JSON consumer never sees half a document followed by an error.
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "analyzer/commands/command.h"
#include "analyzer/model/memory/event_stream.h"
#include "analyzer/render/json/json_events.h"
#include "analyzer/render/output.h"
#include "analyzer/render/text/text_events.h"

namespace cumemtrace::analyzer {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Copies the spool to stdout; false when a read or a write fails.
bool CopyOut(std::FILE* spool, std::FILE* out) {
  if (std::fseek(spool, 0, SEEK_SET) != 0) return false;
  char block[1 << 16];
  size_t n = 0;
  while ((n = std::fread(block, 1, sizeof block, spool)) > 0) {
    if (std::fwrite(block, 1, n, out) != n) return false;
  }
  return std::ferror(spool) == 0 && std::fflush(out) == 0;
}

int Run(const CommandLine& cl, Console& console) {
  std::unique_ptr<std::FILE, FileCloser> spool(std::tmpfile());
  if (spool == nullptr) return console.Error("cannot create a temporary file for the events (is TMPDIR writable?)");
  TraceInfo info;
  absl::Status status;
  {
    BufferedOutput buffered(spool.get());
    if (cl.json) {
      JsonEventSink sink(buffered);
      status = StreamEvents(cl.trace, sink, &info);
    } else {
      TextEventSink sink(buffered);
      status = StreamEvents(cl.trace, sink, &info);
    }
    buffered.Flush();
    if (status.ok() && buffered.failed()) {
      status = absl::ResourceExhaustedError("cannot write the events to a temporary file (is TMPDIR full?)");
    }
  }
  if (!status.ok()) return console.Error(status);
  console.Warn(info);
  if (!CopyOut(spool.get(), console.out())) return console.Error("cannot write the events to stdout");
  return kExitOk;
}

}  // namespace

extern const CommandSpec kEventsCommand = {
    "events", "TRACE.pb [--json]", "every event in sequence order (for debugging)", Operands::kOneTrace, kFlagJson,
    OutputFile::kNone, Run};

}  // namespace cumemtrace::analyzer
