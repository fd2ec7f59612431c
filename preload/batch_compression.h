// Event batches compressed with zstd as one frame that runs across batches (trace format 6, packet events_stream):
// each batch is fed to the same compression stream and flushed, so its packet holds exactly what inflates to it,
// and a batch may refer back to the ones before it. A long training run repeats itself (the same tensors at the
// same addresses from the same lines, step after step): measured on a real PyTorch trace, everything but the times
// then compresses to almost nothing (docs/performance.md). A frame ends, and the next batch starts a new one, every
// kFrameInputBytes of batches, so that a damaged packet costs at most the rest of its frame; a new frame also
// starts at the start of tracing, in a forked child and after any compression error.
//
// libzstd.so.1 is dlopen'ed by the flush thread when it starts, holding none of the preload's locks (a dlopen under
// the writer's lock could wait on the loader's lock held by a thread that waits on the writer's), and never
// required: until it is loaded, without it, or with CUMEMTRACE_COMPRESS=0, batches are written as they are. Its
// stream (about 1.4 MB at level 1) is allocated once, by libzstd, on the flush thread. Compression runs where
// batches are written (the flush thread, or a recording thread that must not wait for it), never on the recording
// path itself.
#ifndef CUMEMTRACE_PRELOAD_BATCH_COMPRESSION_H_
#define CUMEMTRACE_PRELOAD_BATCH_COMPRESSION_H_

#include <cstddef>

#include "preload/byte_buffer.h"

namespace cumemtrace::preload {

// Loads libzstd (once; on the flush thread, before it takes any lock).
void LoadBatchCompression();

// `out` ends with one events packet, from `packet_start`. Replaces it with the next part of the compressed stream
// when that is smaller. Returns false only when the batch was lost (out's memory failed while rewriting it: the
// packet is then gone); true when it was compressed or left as it was (no libzstd; a part no smaller than the
// batch, or a compression error: the next batch then starts a new frame). Called with g_io_lock held.
bool CompressEventBatchIoLocked(ByteBuffer* out, size_t packet_start);

// The next batch starts a new frame (a forked child's trace must not refer to its parent's batches). Called with
// every lock held, or by the only thread.
void RestartBatchCompression();

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_BATCH_COMPRESSION_H_
