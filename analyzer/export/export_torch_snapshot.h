// Writes a TorchSnapshot (model/torch/torch_snapshot.h) as the file PyTorch's tools read: a pickle of the dictionary
// torch.cuda.memory._snapshot() returns (pickle_writer.h; what `python -m torch.cuda._memory_viz` and
// pytorch.org/memory_viz load), or the same dictionary as JSON. Keys and values are PyTorch's: see
// docs/json.md's "torch-snapshot" section. Frames are innermost first, as PyTorch lists them: Python frames
// {filename, line, name} from the trace's Python frames, native frames with the function's demangled name and its
// source file and line when the trace has them (else the module's path and line 0). In the pickle, each distinct
// frame and each stack's frame list is written once and shared (the memo), which keeps long traces small.
#ifndef CUMEMTRACE_ANALYZER_EXPORT_EXPORT_TORCH_SNAPSHOT_H_
#define CUMEMTRACE_ANALYZER_EXPORT_EXPORT_TORCH_SNAPSHOT_H_

#include <string>

#include "analyzer/model/torch/torch_snapshot.h"

namespace cumemtrace::analyzer {

std::string TorchSnapshotPickle(const TorchSnapshot& snapshot);
std::string TorchSnapshotJson(const TorchSnapshot& snapshot);
// What the snapshot left out or estimated, as warning lines for stderr (PyTorch's format has no place to say
// it); "" when nothing was.
std::string TorchSnapshotWarnings(const TorchSnapshot& snapshot);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_EXPORT_EXPORT_TORCH_SNAPSHOT_H_
