// A growable byte buffer for the preload, backed by mmap so that it never touches the traced program's malloc
// heap and needs no libstdc++. It only grows (mremap) when a packet is larger than what is left; the hot path
// appends into already mapped memory.
#ifndef CUMEMTRACE_PRELOAD_BYTE_BUFFER_H_
#define CUMEMTRACE_PRELOAD_BYTE_BUFFER_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

class ByteBuffer {
 public:
  // Maps `capacity` bytes. Returns false (and stays empty) if the mapping fails.
  bool Init(size_t capacity);
  void Release();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool ok() const { return ok_; }

  // Makes room for `n` more bytes and returns where they go, or nullptr (and ok() turns false) if memory ran
  // out; the caller then drops what it was writing.
  uint8_t* Reserve(size_t n);
  void Commit(size_t n) { size_ += n; }
  void Append(const void* bytes, size_t n);
  void Truncate(size_t n) { size_ = n; }
  void Clear() { size_ = 0; ok_ = data_ != nullptr; }
  // After a failed write that the caller has undone with Truncate().
  void ClearError() { ok_ = data_ != nullptr; }

 private:
  bool Grow(size_t needed);

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  bool ok_ = false;
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_BYTE_BUFFER_H_
