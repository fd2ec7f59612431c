// Output on its way to the trace file, in units: the packets written since the previous unit (threads, devices,
// notices, memory samples, strings, Python frames), then a batch of events with their stacks as frames.
//
// The threads that record fill the open unit under the recorder's lock and seal it when its batch is full; the flush
// thread takes the sealed units oldest first, interns their stacks (adding stack node packets), encodes their events
// and writes them, holding only the writer's lock. So interning (a lookup and a comparison of a cached copy, in memory
// the program's own work keeps evicting), encoding a batch (tens of ns per event, more with the write) and its
// write(2) no longer run on a thread of the program, under the lock that every other allocating thread waits for; a
// slow disk stalls the flush thread, and the program only once every sealed slot is taken (the sealing thread then
// writes the waiting units itself: the trace stays whole and in order, never dropped).
//
// One producer side (the open unit's methods and Seal: callers hold the recorder's lock) and one consumer side
// (Oldest and Pop: callers hold the writer's lock). The ring's two counters are all the two sides share.
#ifndef CUMEMTRACE_PRELOAD_OUTPUT_QUEUE_H_
#define CUMEMTRACE_PRELOAD_OUTPUT_QUEUE_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>

#include "preload/byte_buffer.h"
#include "preload/event_record.h"
#include "preload/mapped_array.h"

namespace cumemtrace::preload {

class OutputQueue {
 public:
  static constexpr size_t kBatchEvents = 8192;
  // Sealed units that may wait for the writer. Two: one being written, one more filling behind it.
  static constexpr size_t kMaxSealed = 2;

  struct Unit {
    ByteBuffer packets;
    EventRecord* events = nullptr;  // kBatchEvents of them, mapped
    size_t event_count = 0;
    uint64_t complete_below = 0;  // the event batch's mark (sequence.h), taken when the unit was sealed
    // The events' stacks, not yet interned: per stack its frame count, then its frames (innermost first). Until
    // the writer interns them, an event's `stack` is 1 + the offset of its stack here (0: none).
    MappedArray<uint64_t> stacks;
  };

  // Maps every unit's buffers (`packet_bytes` each to start with; they grow). Returns false if memory ran out.
  // Idempotent.
  bool Init(size_t packet_bytes);

  // The open unit (the recorder's lock held).
  ByteBuffer* packets() { return &open().packets; }
  size_t event_count() const { return units_[tail_.load(std::memory_order_relaxed) % kUnits].event_count; }
  bool batch_full() const { return event_count() == kBatchEvents; }
  // The open batch's last event, or nullptr if it has none.
  EventRecord* last_event();
  // Appends to the open batch; the caller seals a full batch before appending again.
  void Append(const EventRecord& ev);
  // Keeps a stack of the open unit for the writer to intern; returns what the event's `stack` holds until then
  // (1 + its offset), or 0 if memory ran out (the event then has no stack, as when interning fails).
  uint64_t KeepStack(const uint64_t* frames, int count);
  // Names the open unit among every unit this process has opened (never reused, not even after Clear): a stack
  // kept in the unit of this generation may be named again by a later event of the same unit.
  uint64_t open_generation() const { return generation_; }

  // Moves the open unit, if it holds anything, behind the sealed ones and opens an empty one. Returns false, and
  // changes nothing, when kMaxSealed units wait already: the caller writes them first.
  bool Seal(uint64_t complete_below);
  bool HasSealed() const;

  // The oldest sealed unit, or nullptr (the writer's lock held). The writer may append to its packets.
  Unit* Oldest();
  // The oldest sealed unit has been written: its slot is free again.
  void Pop();

  // In a forked child, with every lock held: forgets everything buffered (it belongs to the parent).
  void Clear();

 private:
  static constexpr size_t kUnits = kMaxSealed + 1;

  Unit& open() { return units_[tail_.load(std::memory_order_relaxed) % kUnits]; }
  static void Empty(Unit* unit);

  Unit units_[kUnits];
  // Units [head_, tail_) are sealed, oldest first; unit tail_ is the open one (indexes modulo kUnits). tail_ moves
  // only under the recorder's lock, head_ only under the writer's.
  std::atomic<uint64_t> head_{0};
  std::atomic<uint64_t> tail_{0};
  uint64_t generation_ = 1;  // under the recorder's lock: one more with every unit opened
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_OUTPUT_QUEUE_H_
