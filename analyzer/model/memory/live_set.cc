// The live set's open-addressing table (see live_set.h for why not absl; the probing itself: linear_probing.h).
#include "analyzer/model/memory/live_set.h"

#include "analyzer/model/linear_probing.h"

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kInitialSlots = 1024;

}  // namespace

LiveSet::LiveSet()
    : slots_(new Slot[kInitialSlots]()), mask_(kInitialSlots - 1), shift_(64 - __builtin_ctzll(kInitialSlots)),
      seed_(linear_probing::Seed(this)) {}

void LiveSet::Grow() {
  linear_probing::Double(&slots_, &mask_, &shift_, Empty,
                         [this](const Slot& s) { return Home(s.allocation.space, s.address); });
}

bool LiveSet::Insert(uint64_t address, const Allocation& allocation, Allocation* replaced) {
  Slot& slot = slots_[Probe(allocation.space, address)];
  if (!Empty(slot)) {
    *replaced = slot.allocation;
    slot.allocation = allocation;
    return true;
  }
  slot.address = address;
  slot.allocation = allocation;
  // At most half full: probe chains stay short.
  if (++size_ * 2 > mask_ + 1) Grow();
  return false;
}

bool LiveSet::Remove(format::Space space, uint64_t address, Allocation* removed) {
  size_t i = Probe(space, address);
  if (Empty(slots_[i])) return false;
  *removed = slots_[i].allocation;
  i = linear_probing::ShiftBack(slots_.get(), i, mask_, Empty,
                                [this](const Slot& s) { return Home(s.allocation.space, s.address); });
  slots_[i].allocation.kind = format::Kind::kUnknown;
  --size_;
  return true;
}

const Allocation* LiveSet::Find(format::Space space, uint64_t address) const {
  const size_t i = Probe(space, address);
  return Empty(slots_[i]) ? nullptr : &slots_[i].allocation;
}

}  // namespace cumemtrace::analyzer
