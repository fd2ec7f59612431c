#include "preload/output_queue.h"

#include <sys/mman.h>

namespace cumemtrace::preload {

bool OutputQueue::Init(size_t packet_bytes) {
  for (Unit& unit : units_) {
    if (unit.packets.data() == nullptr && !unit.packets.Init(packet_bytes)) return false;
    if (unit.events == nullptr) {
      void* p = mmap(nullptr, kBatchEvents * sizeof(EventRecord), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return false;
      unit.events = static_cast<EventRecord*>(p);
    }
  }
  return true;
}

EventRecord* OutputQueue::last_event() {
  Unit& unit = open();
  return unit.event_count > 0 ? &unit.events[unit.event_count - 1] : nullptr;
}

void OutputQueue::Append(const EventRecord& ev) {
  Unit& unit = open();
  unit.events[unit.event_count++] = ev;
}

uint64_t OutputQueue::KeepStack(const uint64_t* frames, int count) {
  if (count <= 0) return 0;
  MappedArray<uint64_t>& stacks = open().stacks;
  const size_t offset = stacks.size();
  const uint64_t header = static_cast<uint64_t>(count);
  if (!stacks.Append(&header, 1)) return 0;
  if (!stacks.Append(frames, static_cast<size_t>(count))) {
    stacks.Resize(offset);
    return 0;
  }
  return offset + 1;
}

bool OutputQueue::Seal(uint64_t complete_below) {
  Unit& unit = open();
  if (unit.event_count == 0 && unit.packets.size() == 0) return true;
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (tail - head_.load(std::memory_order_acquire) == kMaxSealed) return false;
  unit.complete_below = complete_below;
  // Release: the writer that reads the new tail sees the unit's contents.
  tail_.store(tail + 1, std::memory_order_release);
  ++generation_;
  return true;
}

bool OutputQueue::HasSealed() const {
  return tail_.load(std::memory_order_acquire) != head_.load(std::memory_order_acquire);
}

OutputQueue::Unit* OutputQueue::Oldest() {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  if (head == tail_.load(std::memory_order_acquire)) return nullptr;
  return &units_[head % kUnits];
}

void OutputQueue::Pop() {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  Empty(&units_[head % kUnits]);
  // Release: the sealing thread that reads the new head finds the slot empty.
  head_.store(head + 1, std::memory_order_release);
}

void OutputQueue::Empty(Unit* unit) {
  unit->packets.Clear();
  unit->event_count = 0;
  unit->complete_below = 0;
  unit->stacks.Clear();
}

void OutputQueue::Clear() {
  for (Unit& unit : units_) Empty(&unit);
  head_.store(0, std::memory_order_relaxed);
  ++generation_;  // a forked child's threads may remember stacks kept in the parent's units
  tail_.store(0, std::memory_order_relaxed);
}

}  // namespace cumemtrace::preload
