// Sequence numbers and pending slots (see sequence.h for why and for the ordering argument).
#include "preload/sequence.h"

#include <sched.h>

#include <atomic>

namespace cumemtrace::preload {
namespace {

constexpr int kSlots = 1024;              // threads inside a free at the same moment
constexpr int kMaxPendingPerThread = 8;

std::atomic<uint64_t> g_next{1};
std::atomic<uint64_t> g_slot[kSlots];     // 0 = free; else a lower bound of its thread's pending numbers
std::atomic<int> g_slots_used{0};         // slots [0, g_slots_used) may be non-zero
std::atomic<uint64_t> g_slot_waits{0};

struct Pending {
  uint64_t seq[kMaxPendingPerThread];
  int count;
  int slot;
};
__thread Pending t_pending __attribute__((tls_model("initial-exec")));

// Claims a free slot holding `bound`. Spins (yielding) only if every slot is taken.
int ClaimSlot(uint64_t bound, int hint) {
  for (bool waited = false;; waited = true) {
    for (int k = 0; k < kSlots; ++k) {
      const int i = (hint + k) % kSlots;
      uint64_t expected = 0;
      if (g_slot[i].load(std::memory_order_relaxed) != 0) continue;
      // The high-water mark first: a writer that reads it before this update read the counter before too, so the
      // number taken below is not under its mark.
      int used = g_slots_used.load(std::memory_order_seq_cst);
      while (used < i + 1 && !g_slots_used.compare_exchange_weak(used, i + 1, std::memory_order_seq_cst)) {
      }
      if (g_slot[i].compare_exchange_strong(expected, bound, std::memory_order_seq_cst)) {
        if (waited) g_slot_waits.fetch_add(1, std::memory_order_relaxed);
        return i;
      }
    }
    sched_yield();
  }
}

void Publish(const Pending& p) {
  uint64_t lowest = p.seq[0];
  for (int i = 1; i < p.count; ++i) lowest = p.seq[i] < lowest ? p.seq[i] : lowest;
  g_slot[p.slot].store(lowest, std::memory_order_seq_cst);
}

}  // namespace

uint64_t TakeAppendedSequence() { return g_next.fetch_add(1, std::memory_order_seq_cst); }

uint64_t TakePendingSequence() {
  Pending& p = t_pending;
  if (p.count == 0) p.slot = ClaimSlot(g_next.load(std::memory_order_seq_cst), p.slot);
  const uint64_t seq = g_next.fetch_add(1, std::memory_order_seq_cst);
  // The slot keeps the bound it was claimed with, at most every number this thread holds: publishing the lowest
  // one exactly would cost another locked store on every free (a few ns of the hook's fixed cost) and only lets the
  // mark pass numbers taken between the claim and here. SequenceDone publishes it where numbers stay pending.
  // Beyond kMaxPendingPerThread the number is not kept: the mark waits for the older ones; if this one outlives
  // them all, the reader sees it arrive late and says so.
  if (p.count < kMaxPendingPerThread) p.seq[p.count++] = seq;
  return seq;
}

void SequenceDone(uint64_t seq) {
  Pending& p = t_pending;
  for (int i = 0; i < p.count; ++i) {
    if (p.seq[i] != seq) continue;
    p.seq[i] = p.seq[--p.count];
    if (p.count == 0) {
      // A release store, not a locked one: a CompleteBelow() that reads this 0 then sees the event's append (made
      // before, under the recorder's lock), and one that reads the bound still only holds the mark back.
      g_slot[p.slot].store(0, std::memory_order_release);
    } else {
      Publish(p);
    }
    return;
  }
}

uint64_t CompleteBelow() {
  uint64_t mark = g_next.load(std::memory_order_seq_cst);
  const int used = g_slots_used.load(std::memory_order_seq_cst);
  for (int i = 0; i < used; ++i) {
    const uint64_t v = g_slot[i].load(std::memory_order_seq_cst);
    if (v != 0 && v < mark) mark = v;
  }
  return mark;
}

uint64_t LastSequence() { return g_next.load(std::memory_order_relaxed) - 1; }

uint64_t SequenceSlotWaits() { return g_slot_waits.load(std::memory_order_relaxed); }

void ResetPendingAfterFork() {
  for (std::atomic<uint64_t>& slot : g_slot) slot.store(0, std::memory_order_relaxed);
  t_pending.count = 0;
}

}  // namespace cumemtrace::preload
