// The live set's open-addressing table (see live_set.h for why not absl). Must never lose or duplicate an entry
// on removal: backward-shift deletion keeps every probe chain unbroken.
#include "analyzer/model/memory/live_set.h"

#include <chrono>

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kInitialSlots = 1024;

}  // namespace

LiveSet::LiveSet() : slots_(new Slot[kInitialSlots]()), mask_(kInitialSlots - 1), shift_(64 - __builtin_ctzll(kInitialSlots)) {
  // Any value that differs between runs will do: the table's contents and results never depend on it, only its
  // speed on crafted input.
  seed_ = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
          reinterpret_cast<uintptr_t>(this);
}

void LiveSet::Grow() {
  std::unique_ptr<Slot[]> old = std::move(slots_);
  const size_t old_slots = mask_ + 1;
  slots_.reset(new Slot[old_slots * 2]());
  mask_ = old_slots * 2 - 1;
  --shift_;
  for (size_t i = 0; i < old_slots; ++i) {
    if (!Empty(old[i])) slots_[Probe(old[i].allocation.space, old[i].address)] = old[i];
  }
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
  // Backward-shift deletion: move later members of the chain into the hole when their home allows it.
  for (size_t j = (i + 1) & mask_; !Empty(slots_[j]); j = (j + 1) & mask_) {
    const size_t home = Home(slots_[j].allocation.space, slots_[j].address);
    // Slot j may move to the hole i unless its home lies cyclically in (i, j].
    const bool home_in_between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!home_in_between) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i].allocation.kind = format::Kind::kUnknown;
  --size_;
  return true;
}

const Allocation* LiveSet::Find(format::Space space, uint64_t address) const {
  const size_t i = Probe(space, address);
  return Empty(slots_[i]) ? nullptr : &slots_[i].allocation;
}

}  // namespace cumemtrace::analyzer
