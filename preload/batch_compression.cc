// CompressEventBatchIoLocked (see batch_compression.h).
#include "preload/batch_compression.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

#include <atomic>

#include "preload/recorder_state.h"
#include "preload/wire_encoder.h"
#include "proto/crc32c.h"
#include "proto/format.h"

namespace cumemtrace::preload {
namespace {

// libzstd's stable streaming API (zstd.h, since 1.4.0); the values of its enums are part of that API.
constexpr int kZstdCompressionLevel = 100;  // ZSTD_c_compressionLevel
constexpr int kZstdChecksumFlag = 201;      // ZSTD_c_checksumFlag
constexpr int kZstdFlush = 1;               // ZSTD_e_flush
constexpr int kZstdEnd = 2;                 // ZSTD_e_end
constexpr int kZstdResetSession = 1;        // ZSTD_reset_session_only
struct ZstdIn {
  const void* src;
  size_t size;
  size_t pos;
};
struct ZstdOut {
  void* dst;
  size_t size;
  size_t pos;
};

struct Zstd {
  std::atomic<bool> loaded{false};  // set once by LoadBatchCompression, after everything below
  void* cctx = nullptr;
  size_t (*set_parameter)(void* cctx, int parameter, int value) = nullptr;
  size_t (*compress_stream)(void* cctx, ZstdOut* out, ZstdIn* in, int directive) = nullptr;
  size_t (*reset)(void* cctx, int what) = nullptr;
  size_t (*bound)(size_t size) = nullptr;
  unsigned (*is_error)(size_t code) = nullptr;
};
Zstd g_zstd;
ByteBuffer g_scratch;  // the compressed batch, before it replaces the plain one; guarded by g_io_lock
// The part the next batch is of its frame (0: it starts one), and the batch bytes its frame holds so far; guarded
// by g_io_lock.
uint32_t g_next_part = 0;
size_t g_frame_input = 0;

// Level 1: zstd's fastest standard level; the writer keeps up with any event rate. Offline on real PyTorch traces,
// level 3 was 9 % smaller for 2.7 times the memory and 1.4 times the time on one, 5 % (with a 4 MiB window) on
// another (docs/performance.md, "Runs of hours").
constexpr int kLevel = 1;
constexpr size_t kScratchStart = size_t{1} << 20;
// About 55 batches of a PyTorch training loop: a damaged packet costs at most that; starting frames this often made
// a real trace about 1 % larger than one frame did.
constexpr size_t kFrameInputBytes = size_t{4} << 20;

}  // namespace

void LoadBatchCompression() {
  if (g_zstd.loaded.load(std::memory_order_acquire) || !g_session.config.compress) return;
  void* lib = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return;
  auto create = reinterpret_cast<void* (*)()>(dlsym(lib, "ZSTD_createCCtx"));
  g_zstd.set_parameter = reinterpret_cast<decltype(g_zstd.set_parameter)>(dlsym(lib, "ZSTD_CCtx_setParameter"));
  g_zstd.compress_stream = reinterpret_cast<decltype(g_zstd.compress_stream)>(dlsym(lib, "ZSTD_compressStream2"));
  g_zstd.reset = reinterpret_cast<decltype(g_zstd.reset)>(dlsym(lib, "ZSTD_CCtx_reset"));
  g_zstd.bound = reinterpret_cast<decltype(g_zstd.bound)>(dlsym(lib, "ZSTD_compressBound"));
  g_zstd.is_error = reinterpret_cast<decltype(g_zstd.is_error)>(dlsym(lib, "ZSTD_isError"));
  if (create == nullptr || g_zstd.set_parameter == nullptr || g_zstd.compress_stream == nullptr ||
      g_zstd.reset == nullptr || g_zstd.bound == nullptr || g_zstd.is_error == nullptr) {
    return;
  }
  pthread_mutex_lock(&g_locks.io);
  const bool scratch = g_scratch.ok() || g_scratch.Init(kScratchStart);
  pthread_mutex_unlock(&g_locks.io);
  if (!scratch) return;
  g_zstd.cctx = create();
  if (g_zstd.cctx == nullptr) return;
  // A checksum at each frame's end: a reader learns of a frame that inflated to wrong bytes.
  if (g_zstd.is_error(g_zstd.set_parameter(g_zstd.cctx, kZstdCompressionLevel, kLevel)) != 0 ||
      g_zstd.is_error(g_zstd.set_parameter(g_zstd.cctx, kZstdChecksumFlag, 1)) != 0) {
    return;
  }
  g_zstd.loaded.store(true, std::memory_order_release);
}

void RestartBatchCompression() {
  if (g_zstd.loaded.load(std::memory_order_acquire)) g_zstd.reset(g_zstd.cctx, kZstdResetSession);
  g_next_part = 0;
  g_frame_input = 0;
}

namespace {
// A varint at `p` (before `end`): its value and length, or 0 when it is not one.
size_t ReadVarint(const uint8_t* p, const uint8_t* end, uint64_t* value) {
  *value = 0;
  for (size_t i = 0; i < kMaxVarintBytes && p + i < end; ++i) {
    *value |= static_cast<uint64_t>(p[i] & 0x7f) << (7 * i);
    if ((p[i] & 0x80) == 0) return i + 1;
  }
  return 0;
}

constexpr uint8_t LengthTag(uint32_t field) { return static_cast<uint8_t>((field << 3) | 2); }

}  // namespace

bool CompressEventBatchIoLocked(ByteBuffer* out, size_t packet_start) {
  if (!g_zstd.loaded.load(std::memory_order_acquire)) return true;
  // The packet as WriteEventBatch wrote it: [TracePacket tag][length][events tag][length][EventBatch].
  const uint8_t* p = out->data() + packet_start;
  const uint8_t* end = out->data() + out->size();
  uint64_t length = 0;
  if (p >= end || *p++ != LengthTag(format::field::kTracePacket)) return true;
  size_t n = ReadVarint(p, end, &length);
  if (n == 0) return true;
  p += n;
  if (p >= end || *p++ != LengthTag(format::field::packet::kEvents)) return true;
  n = ReadVarint(p, end, &length);
  if (n == 0 || length != static_cast<uint64_t>(end - p - n)) return true;
  p += n;
  const uint32_t crc = format::Crc32c(p, length);
  if (g_next_part == 0) g_zstd.reset(g_zstd.cctx, kZstdResetSession);
  g_frame_input += length;
  const bool last = g_frame_input >= kFrameInputBytes;
  ZstdIn in{p, length, 0};
  g_scratch.Clear();
  size_t capacity = g_zstd.bound(length) + 64;
  size_t remaining = 0;
  do {
    uint8_t* dst = g_scratch.Reserve(capacity);
    if (dst == nullptr) {
      g_scratch.ClearError();
      RestartBatchCompression();
      return true;
    }
    ZstdOut zout{dst, capacity, 0};
    remaining = g_zstd.compress_stream(g_zstd.cctx, &zout, &in, last ? kZstdEnd : kZstdFlush);
    if (g_zstd.is_error(remaining) != 0) {
      RestartBatchCompression();  // the stream's state is unknown: the next batch starts a new frame
      return true;
    }
    g_scratch.Commit(zout.pos);
  } while (remaining != 0 || in.pos < in.size);
  // A part no smaller than the batch (a few events, or bytes that do not compress) is not written: the batch stays
  // plain and the next one starts a new frame, whose parts cannot refer to a part missing from the file. So a
  // compressed batch is never larger than the plain one, and a size limit's arithmetic on the plain batch holds.
  if (g_scratch.size() + 4 * kMaxVarintBytes >= length) {
    RestartBatchCompression();
    return true;
  }
  out->Truncate(packet_start);
  WireEncoder e(out);
  const size_t outer = e.Begin(format::field::kTracePacket);
  const size_t inner = e.Begin(format::field::packet::kEventsStream);
  e.Uint64(format::field::streamed_events::kPart, g_next_part);
  e.Bytes(format::field::streamed_events::kZstd, g_scratch.data(), g_scratch.size());
  e.Fixed32(format::field::streamed_events::kCrc32c, crc);
  e.End(inner);
  e.End(outer);
  if (!out->ok()) {  // cannot happen: the part fits where the plain batch was
    out->Truncate(packet_start);
    out->ClearError();
    RestartBatchCompression();
    return false;
  }
  if (last) {
    g_next_part = 0;
    g_frame_input = 0;
  } else {
    ++g_next_part;
  }
  return true;
}

}  // namespace cumemtrace::preload
