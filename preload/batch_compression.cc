// CompressEventBatchIoLocked (see batch_compression.h).
#include "preload/batch_compression.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

#include <atomic>

#include "preload/recorder_state.h"
#include "preload/wire_encoder.h"
#include "proto/format.h"

namespace cumemtrace::preload {
namespace {

// The four functions of libzstd's stable API this needs.
struct Zstd {
  std::atomic<bool> loaded{false};  // set once by LoadBatchCompression, after everything below
  void* cctx = nullptr;
  size_t (*compress)(void* cctx, void* dst, size_t capacity, const void* src, size_t size, int level) = nullptr;
  size_t (*bound)(size_t size) = nullptr;
  unsigned (*is_error)(size_t code) = nullptr;
};
Zstd g_zstd;
ByteBuffer g_scratch;  // the compressed batch, before it replaces the plain one; guarded by g_io_lock

// Level 1: zstd's fastest standard level; the writer keeps up with any event rate, and higher levels gained little
// on PyTorch traces' columns.
constexpr int kLevel = 1;
constexpr size_t kScratchStart = size_t{1} << 20;

}  // namespace

void LoadBatchCompression() {
  if (g_zstd.loaded.load(std::memory_order_acquire) || !g_session.config.compress) return;
  void* lib = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return;
  auto create = reinterpret_cast<void* (*)()>(dlsym(lib, "ZSTD_createCCtx"));
  g_zstd.compress = reinterpret_cast<decltype(g_zstd.compress)>(dlsym(lib, "ZSTD_compressCCtx"));
  g_zstd.bound = reinterpret_cast<decltype(g_zstd.bound)>(dlsym(lib, "ZSTD_compressBound"));
  g_zstd.is_error = reinterpret_cast<decltype(g_zstd.is_error)>(dlsym(lib, "ZSTD_isError"));
  if (create == nullptr || g_zstd.compress == nullptr || g_zstd.bound == nullptr || g_zstd.is_error == nullptr) {
    return;
  }
  pthread_mutex_lock(&g_locks.io);
  const bool scratch = g_scratch.ok() || g_scratch.Init(kScratchStart);
  pthread_mutex_unlock(&g_locks.io);
  if (!scratch) return;
  g_zstd.cctx = create();
  if (g_zstd.cctx != nullptr) g_zstd.loaded.store(true, std::memory_order_release);
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
  const size_t capacity = g_zstd.bound(length);
  g_scratch.Clear();
  uint8_t* dst = g_scratch.Reserve(capacity);
  if (dst == nullptr) {
    g_scratch.ClearError();
    return true;
  }
  const size_t size = g_zstd.compress(g_zstd.cctx, dst, capacity, p, length, kLevel);
  if (g_zstd.is_error(size) != 0 || size + 2 * kMaxVarintBytes >= length) return true;
  g_scratch.Commit(size);
  // Smaller than what it replaces, so it fits where that was: `out` does not need to grow.
  out->Truncate(packet_start);
  WireEncoder e(out);
  const size_t outer = e.Begin(format::field::kTracePacket);
  e.Bytes(format::field::packet::kEventsZstd, g_scratch.data(), size);
  e.End(outer);
  if (out->ok()) return true;
  out->Truncate(packet_start);
  out->ClearError();
  return false;
}

}  // namespace cumemtrace::preload
