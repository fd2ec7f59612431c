// The allocations live at the current point of a replay, keyed by (address space, address). Memory grows with
// live allocations only; it must never hold events: a freed allocation is gone.
//
// Why not absl::flat_hash_map: insert and erase are the model's hottest operations (one per event), and on the
// machines this was measured on a linear-probing table of 64-byte slots (one cache line each) with a plain 64-bit
// mixer and backward-shift deletion was 2.5x faster. The mixer is seeded per process so that crafted addresses
// cannot force long probe chains.
#ifndef CUMEMTRACE_ANALYZER_MODEL_MEMORY_LIVE_SET_H_
#define CUMEMTRACE_ANALYZER_MODEL_MEMORY_LIVE_SET_H_

#include <cstdint>
#include <memory>

#include "proto/format.h"

namespace cumemtrace::analyzer {

struct Allocation {
  uint64_t size = 0;
  uint64_t stack = 0;
  int64_t time_ns = 0;  // trace clock, as in the event
  uint64_t seq = 0;
  uint64_t index = 0;   // replay position of the allocating event
  int32_t device = 0;
  uint32_t thread = 0;
  format::Api api = format::Api::kUnknown;
  format::Kind kind = format::Kind::kUnknown;  // never kUnknown for a live allocation
  format::Space space = format::Space::kAllocation;
};

// Every allocating api has a kind: the live set marks empty slots with kUnknown.
inline constexpr bool AllAllocationsHaveAKind() {
  for (const format::ApiInfo& info : format::kApiTable) {
    if (info.op == format::Op::kAlloc && info.kind == format::Kind::kUnknown) return false;
  }
  return true;
}
static_assert(AllAllocationsHaveAKind());

class LiveSet {
 public:
  LiveSet();

  // Inserts `allocation` (whose `space` is set) at its address. If one was live there it is replaced, copied to
  // `*replaced`, and true is returned.
  bool Insert(uint64_t address, const Allocation& allocation, Allocation* replaced);
  // Removes the allocation at (space, address), copying it to `*removed`; false if none was live there.
  bool Remove(format::Space space, uint64_t address, Allocation* removed);
  const Allocation* Find(format::Space space, uint64_t address) const;
  // Starts loading the slot of (space, address) into the cache: call a few events ahead of Insert/Remove.
  void Prefetch(format::Space space, uint64_t address) const { __builtin_prefetch(&slots_[Home(space, address)], 1); }

  // Calls fn(address, allocation) for each live allocation, in no particular order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (size_t i = 0; i <= mask_; ++i) {
      if (slots_[i].allocation.kind != format::Kind::kUnknown) fn(slots_[i].address, slots_[i].allocation);
    }
  }
  size_t size() const { return size_; }

 private:
  // One cache line each, aligned: a lookup touches one line.
  struct alignas(64) Slot {
    uint64_t address = 0;
    Allocation allocation;  // kind == kUnknown: empty
  };
  static_assert(sizeof(Slot) == 64);

  static bool Empty(const Slot& s) { return s.allocation.kind == format::Kind::kUnknown; }
  // Fibonacci hashing: the top bits of one multiplication (addresses differ in their middle bits).
  size_t Home(format::Space space, uint64_t address) const {
    const uint64_t k = (address ^ seed_ ^ (static_cast<uint64_t>(space) << 60)) * 0x9e3779b97f4a7c15ull;
    return static_cast<size_t>(k >> shift_);
  }
  // The slot holding (space, address), or the empty slot where it would go.
  size_t Probe(format::Space space, uint64_t address) const {
    size_t i = Home(space, address);
    while (!Empty(slots_[i]) && (slots_[i].address != address || slots_[i].allocation.space != space)) {
      i = (i + 1) & mask_;
    }
    return i;
  }
  void Grow();

  std::unique_ptr<Slot[]> slots_;
  size_t mask_ = 0;
  int shift_ = 0;  // 64 - log2(slots)
  size_t size_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_MEMORY_LIVE_SET_H_
