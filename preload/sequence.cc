// Sequence numbers and pending slots (see sequence.h for why).
#include "preload/sequence.h"

#include <atomic>

namespace cumemtrace::preload {
namespace {

constexpr int kSlots = 1024;  // threads inside a free at the same moment
constexpr int kMaxPendingPerThread = 8;
constexpr int kNoSlot = -1;   // the thread's numbers are in the shared overflow

// All guarded by the recorder's lock. g_next is atomic so that LastSequence() stays safe to call without it (every
// caller holds it today); relaxed loads and stores compile to plain moves.
std::atomic<uint64_t> g_next{1};
uint64_t g_slot[kSlots];  // 0 = free; else the lowest number its thread holds pending
int g_slots_used = 0;     // slots [0, g_slots_used) may be non-zero
int g_claim_cursor = 0;   // where the search for a free slot starts: past the last slot claimed
// Numbers of threads that found every slot taken: how many are pending, and a bound below all of them (reset only
// when none is left, so it may lag behind, which only holds the mark back).
uint64_t g_overflow_pending = 0;
uint64_t g_overflow_low = 0;
uint64_t g_overflows = 0;

struct Pending {
  uint64_t seq[kMaxPendingPerThread];
  int count;
  int slot;  // valid while count > 0; between frees, the slot to try first next time
};
__thread Pending t_pending __attribute__((tls_model("initial-exec")));

// A free slot, the thread's previous one first (so that a thread keeps its slot and the used range stays as small
// as the number of threads that free); kNoSlot when every slot is taken.
int ClaimSlotLocked(int hint) {
  if (hint >= 0 && hint < kSlots && g_slot[hint] == 0) return hint;
  for (int k = 0; k < kSlots; ++k) {
    const int i = (g_claim_cursor + k) % kSlots;
    if (g_slot[i] == 0) {
      g_claim_cursor = (i + 1) % kSlots;
      return i;
    }
  }
  return kNoSlot;
}

void PublishLocked(const Pending& p) {
  uint64_t lowest = p.seq[0];
  for (int i = 1; i < p.count; ++i) lowest = p.seq[i] < lowest ? p.seq[i] : lowest;
  g_slot[p.slot] = lowest;
  if (p.slot >= g_slots_used) g_slots_used = p.slot + 1;
}

}  // namespace

uint64_t TakeAppendedSequenceLocked() {
  const uint64_t seq = g_next.load(std::memory_order_relaxed);
  g_next.store(seq + 1, std::memory_order_relaxed);
  return seq;
}

uint64_t TakePendingSequenceLocked() {
  Pending& p = t_pending;
  const uint64_t seq = TakeAppendedSequenceLocked();
  if (p.count == 0) {
    p.slot = ClaimSlotLocked(p.slot);
    if (p.slot == kNoSlot) {
      ++g_overflows;
      if (g_overflow_pending == 0 || seq < g_overflow_low) g_overflow_low = seq;
    }
  }
  // Beyond kMaxPendingPerThread the number is not kept: the slot stays at an older one, so the mark waits for the
  // older ones; if this one outlives them all, the reader sees it arrive late and says so.
  if (p.count == kMaxPendingPerThread) return seq;
  p.seq[p.count++] = seq;
  if (p.slot == kNoSlot) {
    ++g_overflow_pending;
  } else if (p.count == 1) {
    PublishLocked(p);
  }
  return seq;
}

bool SequencePending(uint64_t seq) {
  const Pending& p = t_pending;
  for (int i = 0; i < p.count; ++i) {
    if (p.seq[i] == seq) return true;
  }
  return false;
}

void SequenceDoneLocked(uint64_t seq) {
  Pending& p = t_pending;
  for (int i = 0; i < p.count; ++i) {
    if (p.seq[i] != seq) continue;
    p.seq[i] = p.seq[--p.count];
    if (p.slot == kNoSlot) {
      if (--g_overflow_pending == 0) g_overflow_low = 0;
      if (p.count == 0) p.slot = 0;
    } else if (p.count == 0) {
      g_slot[p.slot] = 0;
    } else {
      PublishLocked(p);
    }
    return;
  }
}

uint64_t CompleteBelow() {
  uint64_t mark = g_next.load(std::memory_order_relaxed);
  for (int i = 0; i < g_slots_used; ++i) {
    if (g_slot[i] != 0 && g_slot[i] < mark) mark = g_slot[i];
  }
  if (g_overflow_pending != 0 && g_overflow_low < mark) mark = g_overflow_low;
  return mark;
}

uint64_t LastSequence() { return g_next.load(std::memory_order_relaxed) - 1; }

uint64_t SequenceOverflows() { return g_overflows; }

void ResetPendingAfterFork() {
  for (uint64_t& slot : g_slot) slot = 0;
  g_slots_used = 0;
  g_claim_cursor = 0;
  g_overflow_pending = g_overflow_low = 0;
  t_pending.count = 0;
}

}  // namespace cumemtrace::preload
