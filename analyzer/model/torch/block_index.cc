// The block index's open-addressing table (see block_index.h). Must never lose or duplicate an entry on removal:
// backward-shift deletion keeps every probe chain unbroken.
#include "analyzer/model/torch/block_index.h"

#include <chrono>

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kInitialSlots = 1024;

}  // namespace

BlockIndex::BlockIndex()
    : slots_(new Slot[kInitialSlots]()), mask_(kInitialSlots - 1), shift_(64 - __builtin_ctzll(kInitialSlots)) {
  // Any value that differs between runs will do: only the table's speed on crafted input depends on it.
  seed_ = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
          reinterpret_cast<uintptr_t>(this);
}

void BlockIndex::Grow() {
  std::unique_ptr<Slot[]> old = std::move(slots_);
  const size_t old_slots = mask_ + 1;
  slots_.reset(new Slot[old_slots * 2]());
  mask_ = old_slots * 2 - 1;
  --shift_;
  for (size_t i = 0; i < old_slots; ++i) {
    if (old[i].node == kNone) continue;
    size_t j = Home(old[i].address);
    while (slots_[j].node != kNone) j = (j + 1) & mask_;
    slots_[j] = old[i];
  }
}

void BlockIndex::Insert(uint64_t address, uint32_t node) {
  size_t i = Home(address);
  while (slots_[i].node != kNone) i = (i + 1) & mask_;
  slots_[i] = Slot{address, node};
  // At most half full: probe chains stay short.
  if (++size_ * 2 > mask_ + 1) Grow();
}

bool BlockIndex::Erase(uint64_t address, uint32_t node) {
  size_t i = Home(address);
  while (slots_[i].node != kNone && (slots_[i].address != address || slots_[i].node != node)) i = (i + 1) & mask_;
  if (slots_[i].node == kNone) return false;
  // Backward-shift deletion: move later members of the chain into the hole when their home allows it.
  for (size_t j = (i + 1) & mask_; slots_[j].node != kNone; j = (j + 1) & mask_) {
    const size_t home = Home(slots_[j].address);
    // Slot j may move to the hole i unless its home lies cyclically in (i, j].
    const bool home_in_between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!home_in_between) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i].node = kNone;
  --size_;
  return true;
}

}  // namespace cumemtrace::analyzer
