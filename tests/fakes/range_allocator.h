// Test double support: the address-range allocator behind the fake libcuda.so.1's device memory and address
// reservations.
//
// Why this exists: the end-to-end tests need a driver that behaves like the real one where cumemtrace can get it
// wrong: an address freed on one thread is handed out again (to the same or another thread), so the trace must
// order the free before the reuse. First fit from the lowest address, with coalescing, makes that reuse happen and
// makes it deterministic: a program can assert that an allocation after a free of the same size gets the freed
// address. The allocator only does arithmetic on addresses; it never touches the memory (there is none behind it).
#ifndef CUMEMTRACE_TESTS_FAKES_RANGE_ALLOCATOR_H_
#define CUMEMTRACE_TESTS_FAKES_RANGE_ALLOCATOR_H_

#include <cstdint>
#include <map>

namespace cumemtrace::fakes {

class RangeAllocator {
 public:
  RangeAllocator(uint64_t base, uint64_t size);

  // Returns the lowest address aligned to `alignment` (a power of two) where `size` bytes are free, and marks them
  // used; returns 0 when no free range is large enough. `size` must be > 0.
  uint64_t Allocate(uint64_t size, uint64_t alignment);

  // Returns [address, address + size) to the free ranges. The range must have come from Allocate.
  void Free(uint64_t address, uint64_t size);

  uint64_t base() const { return base_; }
  uint64_t size() const { return size_; }
  uint64_t free_bytes() const { return free_bytes_; }

 private:
  uint64_t base_;
  uint64_t size_;
  uint64_t free_bytes_;
  std::map<uint64_t, uint64_t> free_;  // start -> length, no two adjacent
};

}  // namespace cumemtrace::fakes

#endif  // CUMEMTRACE_TESTS_FAKES_RANGE_ALLOCATOR_H_
