// Sizes as people type them on a command line ("8GiB", "512MiB", "1.5G", "100"), for the bounds of `check`.
// Binary units (K, KiB, M, MiB, G, GiB, T, TiB) are powers of 1024, decimal ones (KB, MB, GB, TB) of 1000, because
// that is what nvidia-smi and PyTorch's messages print. Pure: it must never print or read anything.
#ifndef CUMEMTRACE_ANALYZER_BYTE_SIZE_H_
#define CUMEMTRACE_ANALYZER_BYTE_SIZE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cumemtrace::analyzer {

// Parses `text` into `*bytes`; InvalidArgument naming `flag` when it is not a size (or overflows 2^64).
absl::Status ParseByteSize(absl::string_view flag, absl::string_view text, uint64_t* bytes);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_BYTE_SIZE_H_
