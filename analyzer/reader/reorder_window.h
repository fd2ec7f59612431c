// Puts events back into sequence-number order. Threads take their numbers and then race to write, so an event can
// reach the file after events with larger numbers, even in an earlier batch.
//
// Traces whose batches carry a low-water mark (EventBatch.complete_below) are ordered exactly: ReleaseBelow(mark)
// lets leave every held event numbered below the mark, which no later batch can precede, and nothing else; the
// window then holds only what is really outstanding. Only if that exceeds kMarkedCapacity (a writer thread stuck
// for millions of events) does the smallest leave early. Traces without marks (older preloads) get the bounded
// window of old: whenever it holds more than `capacity` events, the smallest (seq, arrival) leaves.
//
// Either way an event that arrives after a larger-numbered one has left is counted in late_events(): it is handed
// over out of order, and the reports must say that their numbers cannot be trusted.
//
// It is built for the common case, events that arrive in order: those go to a ring (a sorted FIFO, O(1)), the
// others to a heap beside it. A marked batch that is in order, arriving at an empty window, skips the ring
// altogether (BeginPassThrough). Events leave to the visitor's OnEvents in chunks, straight out of the ring when they
// come from it (no copy); only when a late event must be interleaved do they pass through a small buffer. Memory is
// bounded by `capacity`; it must never grow with the length of the trace.
#ifndef CUMEMTRACE_ANALYZER_READER_REORDER_WINDOW_H_
#define CUMEMTRACE_ANALYZER_READER_REORDER_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

class ReorderWindow {
 public:
  static constexpr size_t kDefaultCapacity = 65536;
  // With marks: a safety bound only (about 400 MiB of held events).
  static constexpr size_t kMarkedCapacity = size_t{1} << 22;
  static constexpr size_t kChunk = 256;

  explicit ReorderWindow(size_t capacity = kDefaultCapacity);

  // Adds `event`; if the window then holds more than its capacity, the smallest event leaves (reaching `visitor`
  // at the latest when kChunk events have left).
  void Push(const Event& event, TraceVisitor& visitor);
  // A batch's low-water mark: every held event numbered below `mark` leaves (in order); from now on the window is
  // bounded by kMarkedCapacity instead of its capacity.
  void ReleaseBelow(uint64_t mark, TraceVisitor& visitor);
  // Called before pushing a batch that carries a mark: its events must not leave early by the old window's rule.
  void ExpectMarks();
  // A marked batch whose rows are in order (numbers `first` to `last`, `mark` its low-water mark) goes straight to
  // the visitor when the window holds nothing and none of it would be late: what the ring would have done with it,
  // without the copy in and out. Returns whether it may: if so, everything that left before has now been handed
  // over, and the batch's events must come through PassOn, in row order, before anything else reaches the window.
  bool BeginPassThrough(uint64_t first, uint64_t last, uint64_t mark, TraceVisitor& visitor);
  void PassOn(absl::Span<const Event> events, TraceVisitor& visitor);
  // In place of PassOn, for a batch whose rows someone else hands to the visitor (decoded on another thread,
  // batch_decoders.h): counts its `rows` rows, the last numbered `last`, as left.
  void PassedOnElsewhere(size_t rows, uint64_t last);
  // Lets every held event leave, smallest first, and hands everything that left to `visitor`.
  void Drain(TraceVisitor& visitor);

  // Events that arrived after an event with a larger number had left: they were handed over out of order.
  uint64_t late_events() const { return late_; }
  // The largest distance (in sequence numbers) by which a late event missed its place.
  uint64_t max_lateness() const { return max_lateness_; }
  // Batches carried marks.
  bool marked() const { return marked_; }

  // Events held (not counting those that left and wait to be handed over).
  size_t size() const { return (ring_size_ - owed_) + heap_.size(); }
  uint64_t emitted() const { return emitted_; }

 private:
  struct HeapEntry {
    Event event;
    uint64_t arrival;
  };
  struct HeapGreater {
    bool operator()(const HeapEntry& a, const HeapEntry& b) const {
      return a.event.seq != b.event.seq ? a.event.seq > b.event.seq : a.arrival > b.arrival;
    }
  };

  size_t Slot(size_t i) const { return (ring_head_ + i) & (ring_.size() - 1); }
  void PopSmallest(TraceVisitor& visitor);
  bool SmallestSeq(uint64_t* seq) const;  // false when empty
  void GrowRing();
  void DeliverOwed(TraceVisitor& visitor);  // hands the owed ring entries over, in place
  void OwedToBuffer();                      // copies the owed ring entries into out_
  void FlushBuffer(TraceVisitor& visitor);

  size_t capacity_;
  // Ring of events in arrival order, sorted by (seq, arrival); entries [0, owed_) have left already but not yet
  // been handed over (only while out_ is empty); entries [owed_, ring_size_) are held.
  std::vector<Event> ring_;
  std::vector<uint64_t> ring_arrival_;
  size_t ring_head_ = 0;
  size_t ring_size_ = 0;
  size_t owed_ = 0;
  std::vector<HeapEntry> heap_;  // events that arrived after a larger one
  std::vector<Event> out_;       // left, in order, waiting to be handed over
  uint64_t arrivals_ = 0;
  uint64_t emitted_ = 0;
  uint64_t released_max_ = 0;  // largest seq that has left
  uint64_t late_ = 0;
  uint64_t max_lateness_ = 0;
  bool marked_ = false;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_READER_REORDER_WINDOW_H_
