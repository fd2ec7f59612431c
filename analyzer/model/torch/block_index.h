// Where each block of the allocator layer's map starts: address -> node, for every block of every segment of a
// device. Nearly every PyTorch event looks a block up here, and most of them add or drop one (a split, a merge).
//
// Why not absl::flat_hash_map: as for the live set (model/memory/live_set.h), a linear-probing table of small
// slots with one multiplication for a hash and backward-shift deletion does these inserts and erases in fewer
// steps (measured on the allocator layer of a long GPT-2 trace: docs/performance.md). The mixer is seeded per
// process so that crafted addresses cannot force long probe chains; nothing a report shows depends on the order
// of the slots.
//
// A key is an address alone. Segments do not overlap in a consistent trace, so an address names one block; in a
// damaged one two segments may, and two entries then share an address: lookups take a predicate that tells the
// entry they want (the node's segment), and the probe goes on past the others.
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_BLOCK_INDEX_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_BLOCK_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <memory>

namespace cumemtrace::analyzer {

class BlockIndex {
 public:
  static constexpr uint32_t kNone = ~uint32_t{0};

  BlockIndex();

  // The node of an entry at `address` for which matches(node) holds, or kNone.
  template <typename Matches>
  uint32_t Find(uint64_t address, Matches&& matches) const {
    for (size_t i = Home(address); slots_[i].node != kNone; i = (i + 1) & mask_) {
      if (slots_[i].address == address && matches(slots_[i].node)) return slots_[i].node;
    }
    return kNone;
  }
  // Adds the entry (address, node): the caller has checked that none it would match is there.
  void Insert(uint64_t address, uint32_t node);
  // Removes the entry (address, node); false if there is none.
  bool Erase(uint64_t address, uint32_t node);
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t address = 0;
    uint32_t node = kNone;  // kNone: empty
  };

  static bool Empty(const Slot& s) { return s.node == kNone; }
  // Fibonacci hashing: the top bits of one multiplication (block addresses differ in their middle bits).
  size_t Home(uint64_t address) const {
    return static_cast<size_t>(((address ^ seed_) * 0x9e3779b97f4a7c15ull) >> shift_);
  }
  void Grow();

  std::unique_ptr<Slot[]> slots_;
  size_t mask_ = 0;
  int shift_ = 0;  // 64 - log2(slots)
  size_t size_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_BLOCK_INDEX_H_
