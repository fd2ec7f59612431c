// A growable array of trivially copyable values backed by mmap/mremap: the preload's only container. It never
// uses the traced program's malloc, needs no libstdc++ and keeps its elements' addresses stable only until the
// next growth (callers index, they do not hold pointers across a Push).
#ifndef CUMEMTRACE_PRELOAD_MAPPED_ARRAY_H_
#define CUMEMTRACE_PRELOAD_MAPPED_ARRAY_H_

#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

namespace cumemtrace::preload {

template <typename T>
class MappedArray {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* data() { return data_; }

  // Returns false if memory ran out (the element is not added).
  bool Push(const T& value) {
    if (size_ == capacity_ && !Reserve(capacity_ == 0 ? 1024 : capacity_ * 2)) return false;
    data_[size_++] = value;
    return true;
  }

  // Makes the array `n` elements long, new elements zeroed. Grows the mapping at least twofold, as Push does: an
  // array resized a little at a time (the stack cache's copies, the string table's characters) would otherwise
  // take an mremap every page.
  bool Resize(size_t n) {
    if (!GrowTo(n)) return false;
    if (n > size_) memset(static_cast<void*>(data_ + size_), 0, (n - size_) * sizeof(T));
    size_ = n;
    return true;
  }

  // Appends `n` values; returns false if memory ran out (nothing is added).
  bool Append(const T* values, size_t n) {
    if (!GrowTo(size_ + n)) return false;
    memcpy(static_cast<void*>(data_ + size_), values, n * sizeof(T));
    size_ += n;
    return true;
  }

  void Clear() { size_ = 0; }

  bool Reserve(size_t n) {
    if (n <= capacity_) return true;
    size_t old_bytes = RoundUp(capacity_ * sizeof(T));
    size_t new_bytes = RoundUp(n * sizeof(T));
    void* p = data_ == nullptr
                  ? mmap(nullptr, new_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                  : mremap(data_, old_bytes, new_bytes, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) return false;
    data_ = static_cast<T*>(p);
    capacity_ = new_bytes / sizeof(T);
    return true;
  }

  void Release() {
    if (data_ != nullptr) munmap(data_, RoundUp(capacity_ * sizeof(T)));
    data_ = nullptr;
    size_ = capacity_ = 0;
  }

 private:
  // Capacity for `n` elements, growing the mapping at least twofold.
  bool GrowTo(size_t n) { return n <= capacity_ || Reserve(n > 2 * capacity_ ? n : 2 * capacity_); }

  static size_t RoundUp(size_t bytes) { return (bytes + 4095) & ~static_cast<size_t>(4095); }

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_MAPPED_ARRAY_H_
