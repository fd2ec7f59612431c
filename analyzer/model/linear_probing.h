// What the model's two hot tables share (memory/live_set.h, torch/block_index.h): open addressing with linear
// probing over a power-of-two array of slots, a seed per table, regrowth by reinsertion, and backward-shift
// deletion. Each table keeps its own slots and keys; these functions take how to tell an empty slot and where a
// slot's entry belongs (its home).
#ifndef CUMEMTRACE_ANALYZER_MODEL_LINEAR_PROBING_H_
#define CUMEMTRACE_ANALYZER_MODEL_LINEAR_PROBING_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace cumemtrace::analyzer::linear_probing {

// Mixed into a table's hash so that crafted addresses cannot force long probe chains. Any value that differs between
// runs will do: a table's contents, and every result, never depend on it, only its speed on crafted input.
inline uint64_t Seed(const void* table) {
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
         reinterpret_cast<uintptr_t>(table);
}

// Doubles a table: *slots (mask *mask, hash shift *shift: a home is the hash's top 64 - *shift bits) becomes an
// array twice as large with every entry moved to the first empty slot from its home there. `home` must read the
// table's new mask and shift (it is called after they change).
template <typename Slot, typename Empty, typename Home>
void Double(std::unique_ptr<Slot[]>* slots, size_t* mask, int* shift, Empty&& empty, Home&& home) {
  std::unique_ptr<Slot[]> old = std::move(*slots);
  const size_t old_slots = *mask + 1;
  slots->reset(new Slot[old_slots * 2]());
  *mask = old_slots * 2 - 1;
  --*shift;
  for (size_t i = 0; i < old_slots; ++i) {
    if (empty(old[i])) continue;
    size_t j = home(old[i]);
    while (!empty((*slots)[j])) j = (j + 1) & *mask;
    (*slots)[j] = old[i];
  }
}

// Removes the entry in slot i without breaking any probe chain: later members of the chain move into the hole when
// their home allows it. Returns the slot left over, which the caller marks empty.
template <typename Slot, typename Empty, typename Home>
size_t ShiftBack(Slot* slots, size_t i, size_t mask, Empty&& empty, Home&& home) {
  for (size_t j = (i + 1) & mask; !empty(slots[j]); j = (j + 1) & mask) {
    const size_t h = home(slots[j]);
    // Slot j may move to the hole i unless its home lies cyclically in (i, j].
    const bool home_in_between = i <= j ? (h > i && h <= j) : (h > i || h <= j);
    if (!home_in_between) {
      slots[i] = slots[j];
      i = j;
    }
  }
  return i;
}

}  // namespace cumemtrace::analyzer::linear_probing

#endif  // CUMEMTRACE_ANALYZER_MODEL_LINEAR_PROBING_H_
