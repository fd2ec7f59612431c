// Applies the EventBatch column rules of trace.proto (deltas, constant columns, per-api columns, failures) to
// columns already parsed out of the wire format, producing one Event per row. Plain C++ on spans: it must never see
// protobuf (reader/trace_reader.cc owns that), never allocate per row, and never branch per row on what the data
// holds (rows of random apis must not stall the loop on mispredictions).
#ifndef CUMEMTRACE_ANALYZER_READER_EVENT_BATCH_DECODER_H_
#define CUMEMTRACE_ANALYZER_READER_EVENT_BATCH_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

struct FailureColumn {
  uint32_t row = 0;
  int32_t result = 0;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  bool has_mem_info = false;
};

// One EventBatch's columns, as trace.proto names them.
struct BatchColumns {
  uint64_t first_seq = 0;
  int64_t base_time_ns = 0;
  absl::Span<const int64_t> seq_delta;
  absl::Span<const int64_t> time_delta_ns;
  absl::Span<const uint32_t> api;
  absl::Span<const int64_t> address_delta;
  absl::Span<const uint64_t> size;
  absl::Span<const uint64_t> stack;
  absl::Span<const uint32_t> thread;
  absl::Span<const int32_t> device;
  absl::Span<const uint64_t> stream;
  absl::Span<const uint64_t> aux;
  absl::Span<const FailureColumn> failures;
  absl::Span<const uint32_t> cupti_rows;  // rows seen only by CUPTI
  uint64_t complete_below = 0;            // the batch's low-water mark (0 = none written)
  absl::Span<const uint32_t> thread_runs;  // version 2: run lengths of `thread` (empty: not run-length coded)
  absl::Span<const uint32_t> device_runs;
  uint64_t address_shift = 0;              // version 3: address_delta holds deltas divided by 2^address_shift
  uint64_t time_unit_ns = 0;               // version 6: time_delta_ns holds deltas in this unit (0 = 1 ns)
  uint32_t format_version = 1;             // the header's: 2 = the stack column covers only rows with a stack
};

// Decodes one batch's rows a piece at a time, so that a caller can hand each piece on while it is still in the
// cache: a whole batch of Events (8192 rows, 850 KB) does not fit in one, and reading it back afterwards waited on
// memory. Start() checks every column's entry count against the rules before any row is decoded, so Next() needs no
// checks. Reused from batch to batch: it only grows.
class EventBatchDecoder {
 public:
  // Checks `columns` and expands version 2's compact forms; their spans must outlive the decoding. Returns an error
  // (without the file name: the caller adds it and the byte offset) naming the column whose entry count breaks the
  // rules; then no rows are left to decode.
  absl::Status Start(const BatchColumns& columns);

  size_t rows() const { return rows_; }
  size_t remaining() const { return rows_ - next_; }
  // Rows whose api this version does not know: they get info == nullptr, and are taken to carry no size, stream or
  // aux entry (a new api that does must come with a new format version).
  size_t unknown_rows() const { return unknown_rows_; }
  // Whether the rows' sequence numbers never decrease from row to row, and the first and last of them (known before
  // any row is decoded: callers decide from them where the rows go).
  bool in_order() const { return in_order_; }
  uint64_t first_seq() const { return first_seq_; }
  uint64_t last_seq() const { return last_seq_; }

  // Decodes the next min(n, remaining()) rows into out[0, k) and returns k.
  size_t Next(Event* out, size_t n);

 private:
  BatchColumns c_;
  // Version 2's run-length and stack-row columns, one entry per row; failures and CUPTI rows in row order.
  std::vector<uint32_t> thread_;
  std::vector<int32_t> device_;
  std::vector<uint64_t> stack_;
  std::vector<FailureColumn> failures_;
  std::vector<uint32_t> cupti_rows_;
  size_t rows_ = 0;
  size_t next_ = 0;
  size_t unknown_rows_ = 0;
  bool in_order_ = true;
  uint64_t first_seq_ = 0;
  uint64_t last_seq_ = 0;
  // Where the row loop stands: the running sums of the delta columns and the next entry of each per-api column.
  uint32_t address_shift_ = 0;
  uint64_t time_unit_ = 1;
  uint64_t seq_ = 0;
  uint64_t time_ = 0;
  uint64_t address_ = 0;
  size_t size_i_ = 0, stream_i_ = 0, aux_i_ = 0;
  size_t failure_i_ = 0, cupti_i_ = 0;
};

// Decodes every row of `columns` into (*out)[0, *rows) at once (for tests and tools; the reader decodes piece by
// piece). `out` only grows; entries past *rows are left as they were. Errors as EventBatchDecoder::Start.
absl::Status DecodeEventBatch(const BatchColumns& columns, std::vector<Event>* out, size_t* rows);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_READER_EVENT_BATCH_DECODER_H_
