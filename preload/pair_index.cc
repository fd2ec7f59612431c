#include "preload/pair_index.h"

namespace cumemtrace::preload {

uint64_t PairIndex::Find(uint64_t a, uint64_t b) const {
  if (slots_.size() == 0) return 0;
  size_t mask = slots_.size() - 1;
  for (size_t i = MixKeys(a, b) & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id == 0) return 0;
    if (s.a == a && s.b == b) return s.id;
  }
}

// Keeps the table at most half full, doubling it (from 4096 slots) when needed.
bool PairIndex::Grow() {
  size_t old_size = slots_.size();
  if (old_size != 0 && (used_ + 1) * 2 <= old_size) return true;
  MappedArray<Slot> bigger;
  if (!bigger.Resize(old_size == 0 ? 4096 : old_size * 2)) return false;
  size_t mask = bigger.size() - 1;
  for (size_t j = 0; j < old_size; ++j) {
    const Slot& s = slots_[j];
    if (s.id == 0) continue;
    size_t i = MixKeys(s.a, s.b) & mask;
    while (bigger[i].id != 0) i = (i + 1) & mask;
    bigger[i] = s;
  }
  slots_.Release();
  slots_ = bigger;
  return true;
}

bool PairIndex::Insert(uint64_t a, uint64_t b, uint64_t id) {
  if (!Grow()) return false;
  size_t mask = slots_.size() - 1;
  size_t i = MixKeys(a, b) & mask;
  while (slots_[i].id != 0) i = (i + 1) & mask;
  slots_[i] = Slot{a, b, id};
  ++used_;
  return true;
}

void PairIndex::Reset() {
  slots_.Release();
  used_ = 0;
}

}  // namespace cumemtrace::preload
