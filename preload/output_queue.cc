#include "preload/output_queue.h"

#include <string.h>
#include <sys/mman.h>

#include "preload/python_frames.h"

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

namespace {

// A kept stack's header word: its native frame count; with kHasPython, also its Python frame and group counts.
constexpr uint64_t kHasPython = uint64_t{1} << 63;
constexpr int kCountBits = 16;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
constexpr int kGroupEndsPerWord = sizeof(uint64_t) / sizeof(uint16_t);

}  // namespace

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

uint64_t OutputQueue::KeepPythonStack(const KeptStack& stack) {
  if (stack.group_count < 0 || stack.group_count > kMaxPythonFrames + 1 || stack.python_count < 0) return 0;
  const int native = stack.native_count > 0 ? stack.native_count : 0;
  const uint64_t header = kHasPython | static_cast<uint64_t>(native) |
                          (static_cast<uint64_t>(stack.python_count) << kCountBits) |
                          (static_cast<uint64_t>(stack.group_count) << (2 * kCountBits));
  uint64_t group_words[(kMaxPythonFrames + 1 + kGroupEndsPerWord - 1) / kGroupEndsPerWord] = {};
  const size_t group_word_count =
      (static_cast<size_t>(stack.group_count) + kGroupEndsPerWord - 1) / kGroupEndsPerWord;
  memcpy(group_words, stack.group_end, sizeof(uint16_t) * static_cast<size_t>(stack.group_count));
  MappedArray<uint64_t>& stacks = open().stacks;
  const size_t offset = stacks.size();
  if (!stacks.Append(&header, 1) || !stacks.Append(stack.native, static_cast<size_t>(native)) ||
      !stacks.Append(stack.python, static_cast<size_t>(stack.python_count)) ||
      !stacks.Append(group_words, group_word_count)) {
    stacks.Resize(offset);
    return 0;
  }
  return offset + 1;
}

OutputQueue::KeptStack OutputQueue::ReadKept(const Unit& unit, uint64_t ref) {
  const uint64_t* kept = &unit.stacks[ref - 1];
  const uint64_t header = kept[0];
  KeptStack stack{};
  stack.native = kept + 1;
  stack.native_count = static_cast<int>(header & kCountMask);
  stack.has_python = (header & kHasPython) != 0;
  if (!stack.has_python) {
    stack.native_count = static_cast<int>(header);
    return stack;
  }
  stack.python = stack.native + stack.native_count;
  stack.python_count = static_cast<int>((header >> kCountBits) & kCountMask);
  stack.group_end = reinterpret_cast<const uint16_t*>(stack.python + stack.python_count);
  stack.group_count = static_cast<int>((header >> (2 * kCountBits)) & kCountMask);
  return stack;
}

bool OutputQueue::Seal(uint64_t complete_below) {
  Unit& unit = open();
  if (unit.event_count == 0 && unit.packets.size() == 0) return true;
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (tail - head_.load(std::memory_order_acquire) == kMaxSealed) return false;
  unit.complete_below = complete_below;
  // Release: the writer that reads the new tail sees the unit's contents.
  tail_.store(tail + 1, std::memory_order_release);
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
  tail_.store(0, std::memory_order_relaxed);
}

}  // namespace cumemtrace::preload
