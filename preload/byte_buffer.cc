#include "preload/byte_buffer.h"

#include <string.h>
#include <sys/mman.h>

namespace cumemtrace::preload {
bool ByteBuffer::Init(size_t capacity) {
  void* p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  data_ = static_cast<uint8_t*>(p);
  capacity_ = capacity;
  size_ = 0;
  ok_ = true;
  return true;
}

void ByteBuffer::Release() {
  if (data_ != nullptr) munmap(data_, capacity_);
  data_ = nullptr;
  size_ = capacity_ = 0;
  ok_ = false;
}

bool ByteBuffer::Grow(size_t needed) {
  size_t capacity = capacity_ == 0 ? (1u << 20) : capacity_;
  while (capacity < needed) capacity *= 2;
  void* p = data_ == nullptr
                ? mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                : mremap(data_, capacity_, capacity, MREMAP_MAYMOVE);
  if (p == MAP_FAILED) return false;
  data_ = static_cast<uint8_t*>(p);
  capacity_ = capacity;
  return true;
}

uint8_t* ByteBuffer::Reserve(size_t n) {
  if (ok_ && size_ + n <= capacity_) return data_ + size_;
  if (ok_ && Grow(size_ + n)) return data_ + size_;
  ok_ = false;
  return nullptr;
}

void ByteBuffer::Append(const void* bytes, size_t n) {
  uint8_t* dst = Reserve(n);
  if (dst == nullptr) return;
  memcpy(dst, bytes, n);
  Commit(n);
}

}  // namespace cumemtrace::preload
