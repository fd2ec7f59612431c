// Event batches compressed with zstd (trace format 5, packet events_zstd): a real PyTorch trace shrinks about three
// times, which is what makes a run of hours fit in a bug report. libzstd.so.1 is dlopen'ed by the flush thread when
// it starts, holding none of the preload's locks (a dlopen under the writer's lock could wait on the loader's lock
// held by a thread that waits on the writer's), and never required: until it is loaded, without it, with
// CUMEMTRACE_COMPRESS=0, or when a batch would not shrink, batches are written as they are. Compression runs where
// batches are written (the flush thread, or a recording thread that must not wait for it), never on the recording
// path itself.
#ifndef CUMEMTRACE_PRELOAD_BATCH_COMPRESSION_H_
#define CUMEMTRACE_PRELOAD_BATCH_COMPRESSION_H_

#include <cstddef>

#include "preload/byte_buffer.h"

namespace cumemtrace::preload {

// Loads libzstd (once; on the flush thread, before it takes any lock).
void LoadBatchCompression();

// `out` ends with one events packet, from `packet_start`. Replaces it with its compressed form when that is
// smaller. Returns false only when the batch was lost (out's memory failed while rewriting it: the packet is then
// gone); true when it was compressed or left as it was. Called with g_io_lock held.
bool CompressEventBatchIoLocked(ByteBuffer* out, size_t packet_start);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_BATCH_COMPRESSION_H_
