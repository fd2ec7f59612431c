// The reorder window (see reorder_window.h). Must never hand events over out of the min-heap order, nor hand one
// over twice: the "owed" ring entries and the copy buffer are never both in use.
#include "analyzer/reader/reorder_window.h"

#include <algorithm>

namespace cumemtrace::analyzer {

ReorderWindow::ReorderWindow(size_t capacity) : capacity_(capacity) { out_.reserve(kChunk); }

void ReorderWindow::GrowRing() {
  // Power-of-two ring, grown on demand so that small traces do not pay for the whole window.
  const size_t new_size = ring_.empty() ? 64 : ring_.size() * 2;
  std::vector<Event> events(new_size);
  std::vector<uint64_t> arrivals(new_size);
  for (size_t i = 0; i < ring_size_; ++i) {
    events[i] = ring_[Slot(i)];
    arrivals[i] = ring_arrival_[Slot(i)];
  }
  ring_ = std::move(events);
  ring_arrival_ = std::move(arrivals);
  ring_head_ = 0;
}

void ReorderWindow::Push(const Event& event, TraceVisitor& visitor) {
  const uint64_t arrival = arrivals_++;
  if (emitted_ != 0 && event.seq < released_max_) {
    ++late_;
    max_lateness_ = std::max(max_lateness_, released_max_ - event.seq);
  }
  const bool held_in_ring = ring_size_ > owed_;
  // In order relative to the ring's tail (equal seq: the later arrival sorts after): append to the ring.
  if (!held_in_ring || event.seq >= ring_[Slot(ring_size_ - 1)].seq) {
    if (ring_size_ == ring_.size()) GrowRing();
    const size_t slot = Slot(ring_size_);
    ring_[slot] = event;
    ring_arrival_[slot] = arrival;
    ++ring_size_;
  } else {
    heap_.push_back(HeapEntry{event, arrival});
    std::push_heap(heap_.begin(), heap_.end(), HeapGreater());
  }
  if (size() > capacity_) PopSmallest(visitor);
}

void ReorderWindow::PopSmallest(TraceVisitor& visitor) {
  ++emitted_;
  if (ring_size_ > owed_) {
    const size_t front = Slot(owed_);
    // The front was written a whole window ago and has left the caches; fetch the entries soon to leave.
    const char* ahead = reinterpret_cast<const char*>(&ring_[Slot(owed_ + 16)]);
    __builtin_prefetch(ahead);
    __builtin_prefetch(ahead + sizeof(Event) - 1);
    const bool ring_first = heap_.empty() || ring_[front].seq < heap_.front().event.seq ||
                            (ring_[front].seq == heap_.front().event.seq &&
                             ring_arrival_[front] < heap_.front().arrival);
    if (ring_first) {
      released_max_ = std::max(released_max_, ring_[front].seq);
      if (out_.empty()) {
        // Leaves in place; handed over later as part of a span of the ring.
        if (++owed_ == kChunk) DeliverOwed(visitor);
      } else {
        out_.push_back(ring_[front]);
        ring_head_ = Slot(1);
        --ring_size_;
        if (out_.size() >= kChunk) FlushBuffer(visitor);
      }
      return;
    }
  }
  // A late event leaves: whatever left the ring before it goes first.
  OwedToBuffer();
  std::pop_heap(heap_.begin(), heap_.end(), HeapGreater());
  released_max_ = std::max(released_max_, heap_.back().event.seq);
  out_.push_back(heap_.back().event);
  heap_.pop_back();
  if (out_.size() >= kChunk) FlushBuffer(visitor);
}

void ReorderWindow::DeliverOwed(TraceVisitor& visitor) {
  if (owed_ == 0) return;
  // At most two spans: up to the end of the ring, then from its start.
  const size_t first = std::min(owed_, ring_.size() - ring_head_);
  visitor.OnEvents(absl::Span<const Event>(ring_.data() + ring_head_, first));
  if (first < owed_) visitor.OnEvents(absl::Span<const Event>(ring_.data(), owed_ - first));
  ring_head_ = Slot(owed_);
  ring_size_ -= owed_;
  owed_ = 0;
}

void ReorderWindow::OwedToBuffer() {
  for (size_t i = 0; i < owed_; ++i) out_.push_back(ring_[Slot(i)]);
  ring_head_ = Slot(owed_);
  ring_size_ -= owed_;
  owed_ = 0;
}

void ReorderWindow::FlushBuffer(TraceVisitor& visitor) {
  if (out_.empty()) return;
  visitor.OnEvents(out_);
  out_.clear();
}

bool ReorderWindow::SmallestSeq(uint64_t* seq) const {
  const bool in_ring = ring_size_ > owed_;
  if (!in_ring && heap_.empty()) return false;
  if (!in_ring) {
    *seq = heap_.front().event.seq;
  } else if (heap_.empty()) {
    *seq = ring_[Slot(owed_)].seq;
  } else {
    *seq = std::min(ring_[Slot(owed_)].seq, heap_.front().event.seq);
  }
  return true;
}

void ReorderWindow::ExpectMarks() {
  if (marked_) return;
  marked_ = true;
  capacity_ = std::max(capacity_, kMarkedCapacity);
}

void ReorderWindow::ReleaseBelow(uint64_t mark, TraceVisitor& visitor) {
  ExpectMarks();
  uint64_t smallest = 0;
  while (SmallestSeq(&smallest) && smallest < mark) PopSmallest(visitor);
}

bool ReorderWindow::BeginPassThrough(uint64_t first, uint64_t last, uint64_t mark, TraceVisitor& visitor) {
  const bool late = emitted_ != 0 && first < released_max_;
  if (!marked_ || mark == 0 || size() != 0 || first > last || last >= mark || late) return false;
  // What left the ring before goes first: either owed entries or a buffer, never both.
  DeliverOwed(visitor);
  FlushBuffer(visitor);
  return true;
}

void ReorderWindow::PassOn(absl::Span<const Event> events, TraceVisitor& visitor) {
  if (events.empty()) return;
  PassedOnElsewhere(events.size(), events.back().seq);
  visitor.OnEvents(events);
}

void ReorderWindow::PassedOnElsewhere(size_t rows, uint64_t last) {
  if (rows == 0) return;
  arrivals_ += rows;
  emitted_ += rows;
  released_max_ = std::max(released_max_, last);
}

void ReorderWindow::Drain(TraceVisitor& visitor) {
  while (size() != 0) PopSmallest(visitor);
  // Either owed entries or a buffer, never both.
  DeliverOwed(visitor);
  FlushBuffer(visitor);
}

}  // namespace cumemtrace::analyzer
