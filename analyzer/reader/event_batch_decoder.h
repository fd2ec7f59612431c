// Applies the EventBatch column rules of trace.proto (deltas, constant columns, per-api columns, failures) to
// columns already parsed out of the wire format, producing one Event per row. Plain C++ on spans: it must never see
// protobuf (reader/trace_reader.cc owns that), never allocate per row, and never branch per row on what the data
// holds (rows of random apis must not stall the loop on mispredictions).
#ifndef CUMEMTRACE_ANALYZER_READER_EVENT_BATCH_DECODER_H_
#define CUMEMTRACE_ANALYZER_READER_EVENT_BATCH_DECODER_H_

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

// Where DecodeEventBatch expands run-length and stack-row columns to one entry per row; reused across batches.
struct DecodeScratch {
  std::vector<uint32_t> thread;
  std::vector<int32_t> device;
  std::vector<uint64_t> stack;
};

// Decodes every row of `columns` into (*out)[0, *rows). `out` only grows, so that a reused vector costs nothing per
// batch; entries past *rows are left as they were. A row whose api this version does not know gets info ==
// nullptr; such a row is taken to carry no size, stream or aux entry (a new api that does must come with a new
// format version). Returns an error (without the file name: the caller adds it and the byte offset) naming the
// column whose entry count breaks the rules.
absl::Status DecodeEventBatch(const BatchColumns& columns, std::vector<Event>* out, size_t* rows);
absl::Status DecodeEventBatch(const BatchColumns& columns, DecodeScratch* scratch, std::vector<Event>* out,
                              size_t* rows);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_READER_EVENT_BATCH_DECODER_H_
