// The block index's open-addressing table (see block_index.h; the probing itself: linear_probing.h).
#include "analyzer/model/torch/block_index.h"

#include "analyzer/model/linear_probing.h"

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kInitialSlots = 1024;

}  // namespace

BlockIndex::BlockIndex()
    : slots_(new Slot[kInitialSlots]()), mask_(kInitialSlots - 1), shift_(64 - __builtin_ctzll(kInitialSlots)),
      seed_(linear_probing::Seed(this)) {}

void BlockIndex::Grow() {
  linear_probing::Double(&slots_, &mask_, &shift_, Empty, [this](const Slot& s) { return Home(s.address); });
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
  i = linear_probing::ShiftBack(slots_.get(), i, mask_, Empty, [this](const Slot& s) { return Home(s.address); });
  slots_[i].node = kNone;
  --size_;
  return true;
}

}  // namespace cumemtrace::analyzer
