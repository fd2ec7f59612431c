// Test double support: first-fit, coalescing address-range allocator of the fake libcuda.so.1 (see the header).
#include "range_allocator.h"

#include <iterator>

namespace cumemtrace::fakes {

RangeAllocator::RangeAllocator(uint64_t base, uint64_t size) : base_(base), size_(size), free_bytes_(size) {
  if (size > 0) free_[base] = size;
}

uint64_t RangeAllocator::Allocate(uint64_t size, uint64_t alignment) {
  if (size == 0 || alignment == 0 || (alignment & (alignment - 1)) != 0) return 0;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t start = it->first;
    const uint64_t end = start + it->second;
    const uint64_t aligned = (start + alignment - 1) & ~(alignment - 1);
    if (aligned < start || aligned >= end || end - aligned < size) continue;
    free_.erase(it);
    if (aligned > start) free_[start] = aligned - start;
    if (aligned + size < end) free_[aligned + size] = end - (aligned + size);
    free_bytes_ -= size;
    return aligned;
  }
  return 0;
}

void RangeAllocator::Free(uint64_t address, uint64_t size) {
  if (size == 0) return;
  free_bytes_ += size;
  auto next = free_.lower_bound(address);
  uint64_t start = address;
  uint64_t length = size;
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      length += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && next->first == address + size) {
    length += next->second;
    free_.erase(next);
  }
  free_[start] = length;
}

}  // namespace cumemtrace::fakes
