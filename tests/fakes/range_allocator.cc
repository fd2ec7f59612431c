// Test double support: first-fit, coalescing address-range allocator of the fake libcuda.so.1 (see the header).
#include "range_allocator.h"

#include <iterator>

namespace cumemtrace::fakes {

RangeAllocator::RangeAllocator(uint64_t base, uint64_t size) : base_(base), size_(size), free_bytes_(size) {
  if (size > 0) AddFree(base, size);
}

void RangeAllocator::AddFree(uint64_t start, uint64_t length) {
  free_[start] = length;
  by_class_[SizeClass(length)][start] = length;
}

void RangeAllocator::RemoveFree(Ranges::iterator it) {
  by_class_[SizeClass(it->second)].erase(it->first);
  free_.erase(it);
}

uint64_t RangeAllocator::FirstFit(const Ranges& ranges, uint64_t size, uint64_t alignment, uint64_t below) {
  for (const auto& [start, length] : ranges) {
    if (start >= below) break;
    const uint64_t end = start + length;
    const uint64_t aligned = (start + alignment - 1) & ~(alignment - 1);
    if (aligned < start || aligned >= end || end - aligned < size) continue;
    return start;
  }
  return 0;
}

uint64_t RangeAllocator::Allocate(uint64_t size, uint64_t alignment) {
  if (size == 0 || alignment == 0 || (alignment & (alignment - 1)) != 0) return 0;
  // Ranges of a lower class are shorter than `size`. In a class whose shortest range leaves room for any alignment
  // every range fits, so its lowest is its candidate; other classes are searched range by range.
  uint64_t best = 0;
  for (int k = SizeClass(size); k < 64; ++k) {
    const Ranges& ranges = by_class_[k];
    if (ranges.empty()) continue;
    const uint64_t shortest = uint64_t{1} << k;
    const bool all_fit = shortest >= size && shortest - size >= alignment - 1;
    const uint64_t below = best == 0 ? ~uint64_t{0} : best;
    const uint64_t lowest = ranges.begin()->first;
    const uint64_t candidate = all_fit ? (lowest < below ? lowest : 0) : FirstFit(ranges, size, alignment, below);
    if (candidate != 0) best = candidate;
  }
  if (best == 0) return 0;
  auto it = free_.find(best);
  const uint64_t start = it->first;
  const uint64_t end = start + it->second;
  const uint64_t aligned = (start + alignment - 1) & ~(alignment - 1);
  RemoveFree(it);
  if (aligned > start) AddFree(start, aligned - start);
  if (aligned + size < end) AddFree(aligned + size, end - (aligned + size));
  free_bytes_ -= size;
  return aligned;
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
      RemoveFree(prev);
    }
  }
  if (next != free_.end() && next->first == address + size) {
    length += next->second;
    RemoveFree(next);
  }
  AddFree(start, length);
}

}  // namespace cumemtrace::fakes
