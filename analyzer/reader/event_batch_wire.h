// The fast path for EventBatch packets, which are nearly all of a trace: finds the packed columns in the message's
// wire bytes and decodes them with tight varint loops into reused arrays, instead of going through the generated
// parser. It uses the field numbers of proto/format.h (the constants the preload's encoder writes with).
//
// It must never be the last word on a packet: whenever the bytes are not exactly the canonical encoding it knows
// (a column split over several fields or written unpacked, groups, a wire type it does not expect, anything
// malformed) it answers kNotTaken and the caller parses with the generated class, which decides. A differential
// test (tests/unit/analyzer/event_batch_wire_test.cc) holds the two paths to the same result.
#ifndef CUMEMTRACE_ANALYZER_READER_EVENT_BATCH_WIRE_H_
#define CUMEMTRACE_ANALYZER_READER_EVENT_BATCH_WIRE_H_

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "analyzer/reader/event_batch_decoder.h"

namespace cumemtrace::analyzer {

// A growable array of plain values that does not initialize what it hands out (decoding overwrites it anyway).
template <typename T>
class PodBuffer {
 public:
  // Room for `n` values from the start; keeps nothing.
  T* Reserve(size_t n) {
    if (n > capacity_) {
      capacity_ = std::max(n, capacity_ * 2);
      data_.reset(new T[capacity_]);
    }
    return data_.get();
  }
  void set_size(size_t n) { size_ = n; }
  absl::Span<const T> span() const { return absl::Span<const T>(data_.get(), size_); }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
  size_t size_ = 0;
};

class EventBatchWire {
 public:
  // Parses the EventBatch message in [data, data + size). True: columns() holds it. False: not taken (see above).
  bool Parse(const uint8_t* data, size_t size);
  // Valid after a successful Parse, until the next Parse.
  const BatchColumns& columns() const { return columns_; }

 private:
  bool ParseFailure(const uint8_t* p, const uint8_t* end);

  PodBuffer<int64_t> seq_delta_;
  PodBuffer<int64_t> time_delta_ns_;
  PodBuffer<uint32_t> api_;
  PodBuffer<int64_t> address_delta_;
  PodBuffer<uint64_t> size_;
  PodBuffer<uint64_t> stack_;
  PodBuffer<uint32_t> thread_;
  PodBuffer<int32_t> device_;
  PodBuffer<uint64_t> stream_;
  PodBuffer<uint64_t> aux_;
  PodBuffer<uint32_t> cupti_rows_;
  PodBuffer<uint32_t> thread_runs_;
  PodBuffer<uint32_t> device_runs_;
  std::vector<FailureColumn> failures_;
  BatchColumns columns_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_READER_EVENT_BATCH_WIRE_H_
