// `cumem-analyze torch-snapshot TRACE.pb -o OUT.pickle`: PyTorch's memory snapshot, for PyTorch's own viewers.
#include <memory>

#include "analyzer/commands/command.h"
#include "analyzer/model/torch/torch_snapshot.h"
#include "analyzer/export/export_torch_snapshot.h"

namespace cumemtrace::analyzer {
namespace {

int Run(const CommandLine& cl, Console& console) {
  absl::StatusOr<std::unique_ptr<TorchSnapshot>> snapshot = BuildTorchSnapshot(cl.trace);
  if (!snapshot.ok()) return console.Error(snapshot.status());
  const TorchSnapshot& s = **snapshot;
  console.Warn(s.info);
  console.Note(TorchSnapshotWarnings(s));
  return console.WriteOutput(cl.output, cl.json ? TorchSnapshotJson(s) : TorchSnapshotPickle(s));
}

}  // namespace

extern const CommandSpec kTorchSnapshotCommand = {
    "torch-snapshot", "TRACE.pb -o OUT.pickle [--json]",
    "PyTorch's memory snapshot (the dictionary torch.cuda.memory._snapshot() returns) rebuilt from the trace's\n"
    "caching-allocator events, as a pickle for pytorch.org/memory_viz and python -m torch.cuda._memory_viz\n"
    "(--json: the same dictionary as JSON)",
    Operands::kOneTrace, kFlagOutput | kFlagJson, OutputFile::kRequired, Run};

}  // namespace cumemtrace::analyzer
