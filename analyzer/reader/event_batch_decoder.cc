// The EventBatch column rules on spans (see event_batch_decoder.h). Must never read past a column: counts are
// checked before the row loop, which then indexes without checks.
#include "analyzer/reader/event_batch_decoder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "analyzer/reader/api_lookup.h"

namespace cumemtrace::analyzer {
namespace {

absl::Status CountError(const char* column, size_t have, size_t want, const char* what) {
  return absl::DataLossError(
      absl::StrCat("event batch column ", column, " has ", have, " entries for ", want, " ", what));
}

// thread, device and stack: one entry per row, or exactly one entry for all rows.
absl::Status CheckPerRowOrConstant(const char* column, size_t have, size_t rows) {
  if (have == rows || (have == 1 && rows != 0) || (rows == 0 && have <= 1)) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("event batch column ", column, " has ", have, " entries for ", rows,
                                          " rows (want one per row, or exactly one)"));
}

// Expands `values` (one per run) with `runs` (their lengths) into `out`, one per row.
template <typename T>
absl::Status ExpandRuns(const char* column, absl::Span<const T> values, absl::Span<const uint32_t> runs,
                        size_t rows, std::vector<T>* out) {
  if (values.size() != runs.size()) {
    return absl::DataLossError(absl::StrCat("event batch column ", column, " has ", values.size(),
                                            " entries for ", runs.size(), " runs"));
  }
  uint64_t total = 0;
  for (uint32_t r : runs) total += r;
  if (total != rows) {
    return absl::DataLossError(
        absl::StrCat("event batch column ", column, " runs cover ", total, " rows of a batch of ", rows));
  }
  out->clear();
  out->reserve(rows);
  for (size_t i = 0; i < runs.size(); ++i) out->insert(out->end(), runs[i], values[i]);
  return absl::OkStatus();
}

}  // namespace

absl::Status EventBatchDecoder::Start(const BatchColumns& given) {
  rows_ = next_ = 0;
  unknown_rows_ = 0;
  // Version 2's compact forms become one entry per row first, so that the rules below are version 1's.
  BatchColumns c = given;
  const size_t batch_rows = c.api.size();
  if (!c.thread_runs.empty()) {
    if (absl::Status s = ExpandRuns("thread", c.thread, c.thread_runs, batch_rows, &thread_); !s.ok()) return s;
    c.thread = thread_;
  }
  if (!c.device_runs.empty()) {
    if (absl::Status s = ExpandRuns("device", c.device, c.device_runs, batch_rows, &device_); !s.ok()) return s;
    c.device = device_;
  }
  if (c.format_version >= 2 && batch_rows > 0) {
    size_t with_stack = 0;
    for (uint32_t api : c.api) {
      const format::ApiInfo* info = LookupApi(api);
      with_stack += info != nullptr && format::RowHasStack(*info, c.format_version) ? 1 : 0;
    }
    if (c.stack.size() != with_stack && !(c.stack.size() == 1 && with_stack > 0) &&
        !(c.stack.empty() && with_stack == 0)) {
      return CountError("stack", c.stack.size(), with_stack, "rows with a stack");
    }
    stack_.assign(batch_rows, 0);
    for (size_t i = 0, k = 0; i < batch_rows; ++i) {
      const format::ApiInfo* info = LookupApi(c.api[i]);
      if (info == nullptr || !format::RowHasStack(*info, c.format_version)) continue;
      stack_[i] = c.stack[c.stack.size() == 1 ? 0 : k++];
    }
    c.stack = stack_;
  }
  const size_t rows = c.api.size();
  if (c.time_delta_ns.size() != rows) return CountError("time_delta_ns", c.time_delta_ns.size(), rows, "rows");
  if (c.address_delta.size() != rows) return CountError("address_delta", c.address_delta.size(), rows, "rows");
  if (c.address_shift > 63) {
    return absl::DataLossError(absl::StrCat("event batch address_shift is ", c.address_shift, " (at most 63)"));
  }
  // A unit longer than a second is damage, not a resolution anyone asks for.
  if (c.time_unit_ns > 1000000000) {
    return absl::DataLossError(absl::StrCat("event batch time_unit_ns is ", c.time_unit_ns, " (at most 1 s)"));
  }
  if (!c.seq_delta.empty() && c.seq_delta.size() != rows) {
    return absl::DataLossError(absl::StrCat("event batch column seq_delta has ", c.seq_delta.size(),
                                            " entries for ", rows, " rows (want one per row, or none)"));
  }
  if (absl::Status s = CheckPerRowOrConstant("thread", c.thread.size(), rows); !s.ok()) return s;
  if (absl::Status s = CheckPerRowOrConstant("device", c.device.size(), rows); !s.ok()) return s;
  if (absl::Status s = CheckPerRowOrConstant("stack", c.stack.size(), rows); !s.ok()) return s;

  // Count the per-api columns first so that the row loop can index them without checks.
  size_t allocating = 0, streamed = 0, with_aux = 0, unknown = 0;
  for (uint32_t api : c.api) {
    const uint8_t columns = LookupColumns(api);
    allocating += columns & kColumnSize;
    streamed += (columns >> 1) & 1;
    with_aux += (columns >> 2) & 1;
    unknown += LookupApi(api) == nullptr ? 1 : 0;
  }
  if (c.size.size() != allocating) return CountError("size", c.size.size(), allocating, "allocating rows");
  if (c.stream.size() != streamed) return CountError("stream", c.stream.size(), streamed, "rows with a stream");
  if (c.aux.size() != with_aux) return CountError("aux", c.aux.size(), with_aux, "rows with an aux value");
  for (const FailureColumn& f : c.failures) {
    if (f.row >= rows) {
      return absl::DataLossError(
          absl::StrCat("event batch column failures names row ", f.row, " of a batch of ", rows, " rows"));
    }
  }
  for (uint32_t row : c.cupti_rows) {
    if (row >= rows) {
      return absl::DataLossError(
          absl::StrCat("event batch column cupti_rows names row ", row, " of a batch of ", rows, " rows"));
    }
  }

  // Row order, so that Next() applies them with one cursor each; of two failures for one row the later wins, as
  // it would written one after the other.
  failures_.assign(c.failures.begin(), c.failures.end());
  std::stable_sort(failures_.begin(), failures_.end(),
                   [](const FailureColumn& a, const FailureColumn& b) { return a.row < b.row; });
  cupti_rows_.assign(c.cupti_rows.begin(), c.cupti_rows.end());
  std::sort(cupti_rows_.begin(), cupti_rows_.end());

  // The sequence numbers, without decoding the rows. Wrapping arithmetic on unsigned values: deltas from a
  // damaged file must not be undefined behaviour.
  in_order_ = true;
  first_seq_ = last_seq_ = c.first_seq;
  if (c.seq_delta.empty()) {
    last_seq_ = c.first_seq + (rows == 0 ? 0 : rows - 1);
    in_order_ = last_seq_ >= first_seq_;
  } else if (rows != 0) {
    uint64_t seq = c.first_seq + static_cast<uint64_t>(c.seq_delta[0]);
    first_seq_ = seq;
    for (size_t i = 1; i < rows; ++i) {
      const uint64_t next = seq + static_cast<uint64_t>(c.seq_delta[i]);
      in_order_ = in_order_ && next >= seq;
      seq = next;
    }
    last_seq_ = seq;
  }

  c_ = c;
  rows_ = rows;
  unknown_rows_ = unknown;
  address_shift_ = static_cast<uint32_t>(c.address_shift);
  time_unit_ = c.time_unit_ns == 0 ? 1 : c.time_unit_ns;
  seq_ = c.first_seq;
  time_ = static_cast<uint64_t>(c.base_time_ns);
  address_ = 0;
  size_i_ = stream_i_ = aux_i_ = 0;
  failure_i_ = cupti_i_ = 0;
  return absl::OkStatus();
}

size_t EventBatchDecoder::Next(Event* events, size_t n) {
  const size_t begin = next_;
  const size_t end = begin + std::min(n, rows_ - begin);
  const BatchColumns& c = c_;
  const size_t rows = rows_;
  // Constant columns read entry 0 for every row (step 0); per-api columns are read at a clamped index and used only
  // when the row has them, so the loop needs no branch on the data. An empty column reads a zero.
  static constexpr uint64_t kZero64 = 0;
  static constexpr uint32_t kZero32 = 0;
  static constexpr int32_t kZeroInt = 0;
  const size_t thread_step = c.thread.size() == rows ? 1 : 0;
  const size_t device_step = c.device.size() == rows ? 1 : 0;
  const size_t stack_step = c.stack.size() == rows ? 1 : 0;
  const uint32_t* thread = c.thread.empty() ? &kZero32 : c.thread.data();
  const int32_t* device = c.device.empty() ? &kZeroInt : c.device.data();
  const uint64_t* stack = c.stack.empty() ? &kZero64 : c.stack.data();
  const uint64_t* size = c.size.empty() ? &kZero64 : c.size.data();
  const uint64_t* stream = c.stream.empty() ? &kZero64 : c.stream.data();
  const uint64_t* aux = c.aux.empty() ? &kZero64 : c.aux.data();
  const size_t size_last = c.size.empty() ? 0 : c.size.size() - 1;
  const size_t stream_last = c.stream.empty() ? 0 : c.stream.size() - 1;
  const size_t aux_last = c.aux.empty() ? 0 : c.aux.size() - 1;
  const int64_t* seq_delta = c.seq_delta.data();
  const bool dense_seq = c.seq_delta.empty();
  // Wrapping arithmetic on unsigned values: deltas from a damaged file must not be undefined behaviour.
  uint64_t seq = seq_, time = time_, address = address_;
  size_t size_i = size_i_, stream_i = stream_i_, aux_i = aux_i_;
  for (size_t i = begin; i < end; ++i) {
    Event& e = events[i - begin];
    seq = dense_seq ? c.first_seq + i : seq + static_cast<uint64_t>(seq_delta[i]);
    time += static_cast<uint64_t>(c.time_delta_ns[i]) * time_unit_;
    address += static_cast<uint64_t>(c.address_delta[i]) << address_shift_;
    const uint32_t api = c.api[i];
    const uint8_t columns = LookupColumns(api);
    const uint64_t has_size = columns & kColumnSize;
    const uint64_t has_stream = (columns >> 1) & 1;
    const uint64_t has_aux = (columns >> 2) & 1;
    e.seq = seq;
    e.time_ns = static_cast<int64_t>(time);
    e.api = static_cast<format::Api>(api);
    e.info = LookupApi(api);
    e.address = address;
    // Multiplying by 0/1 selects without a branch.
    e.size = size[std::min(size_i, size_last)] * has_size;
    e.stream = stream[std::min(stream_i, stream_last)] * has_stream;
    e.aux = aux[std::min(aux_i, aux_last)] * has_aux;
    size_i += has_size;
    stream_i += has_stream;
    aux_i += has_aux;
    e.thread = thread[i * thread_step];
    e.device = device[i * device_step];
    e.stack = stack[i * stack_step];
    e.result = 0;
    e.has_mem_info = false;
    e.free_bytes = 0;
    e.total_bytes = 0;
    e.cupti_only = false;
  }
  for (; cupti_i_ < cupti_rows_.size() && cupti_rows_[cupti_i_] < end; ++cupti_i_) {
    events[cupti_rows_[cupti_i_] - begin].cupti_only = true;
  }
  for (; failure_i_ < failures_.size() && failures_[failure_i_].row < end; ++failure_i_) {
    const FailureColumn& f = failures_[failure_i_];
    Event& e = events[f.row - begin];
    e.result = f.result;
    e.has_mem_info = f.has_mem_info;
    e.free_bytes = f.free_bytes;
    e.total_bytes = f.total_bytes;
  }
  seq_ = seq;
  time_ = time;
  address_ = address;
  size_i_ = size_i;
  stream_i_ = stream_i;
  aux_i_ = aux_i;
  next_ = end;
  return end - begin;
}

absl::Status DecodeEventBatch(const BatchColumns& columns, std::vector<Event>* out, size_t* rows) {
  *rows = 0;
  EventBatchDecoder decoder;
  if (absl::Status s = decoder.Start(columns); !s.ok()) return s;
  if (out->size() < decoder.rows()) out->resize(decoder.rows());
  *rows = decoder.Next(out->data(), decoder.rows());
  return absl::OkStatus();
}

}  // namespace cumemtrace::analyzer
