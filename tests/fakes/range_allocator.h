// Test double support: the address-range allocator behind the fake libcuda.so.1's device memory and address
// reservations.
//
// Why this exists: the end-to-end tests need a driver that behaves like the real one where cumemtrace can get it
// wrong: an address freed on one thread is handed out again (to the same or another thread), so the trace must
// order the free before the reuse. First fit from the lowest address, with coalescing, makes that reuse happen and
// makes it deterministic: a program can assert that an allocation after a free of the same size gets the freed
// address. The allocator only does arithmetic on addresses; it never touches the memory (there is none behind it).
//
// First fit is found without walking every free range: the ranges are also filed by size class (the power of two
// below their length), and only classes whose ranges may be too short for the request are searched range by range.
// Walking them all made the hook benchmark's untraced baseline (bench/run.sh: a thousand live allocations of
// varied sizes) cost several times malloc's per call, and made that cost swing with how fragmented the ranges had
// become by about as much as the hook's whole cost, which is measured as the difference.
#ifndef CUMEMTRACE_TESTS_FAKES_RANGE_ALLOCATOR_H_
#define CUMEMTRACE_TESTS_FAKES_RANGE_ALLOCATOR_H_

#include <array>
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
  using Ranges = std::map<uint64_t, uint64_t>;  // start -> length
  static int SizeClass(uint64_t length) { return 63 - __builtin_clzll(length); }  // length > 0
  void AddFree(uint64_t start, uint64_t length);
  void RemoveFree(Ranges::iterator it);
  // The lowest start in `ranges` (all of one size class) where `size` bytes aligned to `alignment` fit and that is
  // below `below`; 0 when none is.
  static uint64_t FirstFit(const Ranges& ranges, uint64_t size, uint64_t alignment, uint64_t below);

  uint64_t base_;
  uint64_t size_;
  uint64_t free_bytes_;
  Ranges free_;                     // every free range; no two adjacent
  std::array<Ranges, 64> by_class_;  // the same ranges, by size class
};

}  // namespace cumemtrace::fakes

#endif  // CUMEMTRACE_TESTS_FAKES_RANGE_ALLOCATOR_H_
