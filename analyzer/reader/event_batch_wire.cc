// The wire-level fast path for EventBatch (see event_batch_wire.h). Must never accept bytes the generated parser
// would read differently: anything unusual returns false and the generated parser decides.
#include "analyzer/reader/event_batch_wire.h"

#include <cstring>

#include "proto/format.h"

namespace cumemtrace::analyzer {
namespace {

namespace ef = format::field::events;
namespace ff = format::field::failure;

constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;
constexpr uint64_t kMaxField = (uint64_t{1} << 29) - 1;

// A varint at p, bounded by end. False if cut off or longer than 10 bytes.
inline bool Varint(const uint8_t*& p, const uint8_t* end, uint64_t* value) {
  if (p < end && *p < 0x80) {
    *value = *p++;
    return true;
  }
  uint64_t result = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (p >= end) return false;
    const uint64_t byte = *p++;
    result |= (byte & 0x7f) << shift;
    if (byte < 0x80) {
      *value = result;
      return true;
    }
  }
  return false;
}

// Decodes the packed varints in [p, end) into `out` through `convert`. False if the last one is cut off.
template <typename T, typename Convert>
bool PackedColumn(const uint8_t* p, const uint8_t* end, PodBuffer<T>* out, Convert convert) {
  const size_t length = static_cast<size_t>(end - p);
  T* dst = out->Reserve(length);  // never more entries than bytes
  // Columns of one-byte varints only (the api column; often thread, device, small stack ids): widen each byte.
  uint8_t high = 0;
  for (size_t i = 0; i < length; ++i) high |= p[i];
  if (high < 0x80) {
    for (size_t i = 0; i < length; ++i) dst[i] = convert(p[i]);
    out->set_size(length);
    return true;
  }
  size_t n = 0;
  while (p < end) {
    if (end - p >= 8) {
      // Every varint that ends within the next 8 bytes, out of one load: each one's bytes are found from the stop
      // bits alone, so the values do not wait on each other (one varint at a time, each waited on the length of
      // the one before it).
      uint64_t word;
      std::memcpy(&word, p, 8);
      uint64_t stops = ~word & 0x8080808080808080ull;
      if (stops != 0) {
        int start = 0;  // bit where the next varint begins
        do {
          const int stop = __builtin_ctzll(stops) + 1;  // through the high bit of its last byte
          const int bits = stop - start;
          uint64_t x = word >> start;
          x = (bits == 64 ? x : x & ((uint64_t{1} << bits) - 1)) & 0x7f7f7f7f7f7f7f7full;
          x = ((x & 0x7f007f007f007f00ull) >> 1) | (x & 0x007f007f007f007full);
          x = ((x & 0x3fff00003fff0000ull) >> 2) | (x & 0x00003fff00003fffull);
          x = ((x & 0x0fffffff00000000ull) >> 4) | (x & 0x000000000fffffffull);
          dst[n++] = convert(x);
          start = stop;
          stops &= stops - 1;
        } while (stops != 0);
        p += start >> 3;
        continue;
      }
    }
    // Near the end of the column, or a varint longer than 8 bytes.
    uint64_t value;
    if (!Varint(p, end, &value)) return false;
    dst[n++] = convert(value);
  }
  out->set_size(n);
  return true;
}

inline int64_t ZigZag64(uint64_t v) { return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1)); }
inline int32_t ZigZag32(uint64_t v) {
  const uint32_t u = static_cast<uint32_t>(v);
  return static_cast<int32_t>((u >> 1) ^ (~(u & 1) + 1));
}

// Skips a field of wire type `type`; false for groups and invalid types (not taken).
inline bool Skip(uint32_t type, const uint8_t*& p, const uint8_t* end) {
  uint64_t v = 0;
  switch (type) {
    case kVarint: return Varint(p, end, &v);
    case kFixed64:
      if (end - p < 8) return false;
      p += 8;
      return true;
    case kFixed32:
      if (end - p < 4) return false;
      p += 4;
      return true;
    case kLengthDelimited:
      if (!Varint(p, end, &v) || v > static_cast<uint64_t>(end - p)) return false;
      p += v;
      return true;
    default: return false;
  }
}

}  // namespace

bool EventBatchWire::ParseFailure(const uint8_t* p, const uint8_t* end) {
  FailureColumn f;
  while (p < end) {
    uint64_t key = 0, v = 0;
    if (!Varint(p, end, &key)) return false;
    const uint64_t field = key >> 3;
    const uint32_t type = key & 7;
    if (field == 0 || field > kMaxField) return false;
    if (field >= ff::kRow && field <= ff::kHasMemInfo) {
      if (type != kVarint || !Varint(p, end, &v)) return false;
      switch (field) {
        case ff::kRow: f.row = static_cast<uint32_t>(v); break;
        case ff::kResult: f.result = static_cast<int32_t>(v); break;
        case ff::kFreeBytes: f.free_bytes = v; break;
        case ff::kTotalBytes: f.total_bytes = v; break;
        case ff::kHasMemInfo: f.has_mem_info = v != 0; break;
      }
    } else if (!Skip(type, p, end)) {
      return false;
    }
  }
  failures_.push_back(f);
  return true;
}

bool EventBatchWire::Parse(const uint8_t* p, size_t size) {
  const uint8_t* end = p + size;
  columns_ = BatchColumns();
  failures_.clear();
  uint32_t seen = 0;  // columns met so far, by field number: a column written twice is not taken
  for (auto* v : {&seq_delta_, &time_delta_ns_, &address_delta_}) v->set_size(0);
  for (auto* v : {&size_, &stack_, &stream_, &aux_}) v->set_size(0);
  api_.set_size(0);
  cupti_rows_.set_size(0);
  thread_runs_.set_size(0);
  device_runs_.set_size(0);
  thread_.set_size(0);
  device_.set_size(0);
  const auto u64 = [](uint64_t v) { return v; };
  const auto u32 = [](uint64_t v) { return static_cast<uint32_t>(v); };
  while (p < end) {
    uint64_t key = 0;
    if (!Varint(p, end, &key)) return false;
    const uint64_t field = key >> 3;
    const uint32_t type = key & 7;
    if (field == 0 || field > kMaxField) return false;
    if (field == ef::kFirstSeq || field == ef::kBaseTimeNs || field == ef::kCompleteBelow ||
        field == ef::kAddressShift || field == ef::kTimeUnitNs) {
      uint64_t v = 0;
      if (type != kVarint || !Varint(p, end, &v)) return false;
      if (field == ef::kFirstSeq) {
        columns_.first_seq = v;
      } else if (field == ef::kCompleteBelow) {
        columns_.complete_below = v;
      } else if (field == ef::kAddressShift) {
        columns_.address_shift = static_cast<uint32_t>(v);  // a uint32 field: protobuf keeps the low 32 bits
      } else if (field == ef::kTimeUnitNs) {
        columns_.time_unit_ns = v;
      } else {
        columns_.base_time_ns = static_cast<int64_t>(v);
      }
      continue;
    }
    if (field < ef::kSeqDelta || (field > ef::kCuptiRows && field != ef::kThreadRuns && field != ef::kDeviceRuns)) {
      if (!Skip(type, p, end)) return false;
      continue;
    }
    uint64_t length = 0;
    if (type != kLengthDelimited || !Varint(p, end, &length) || length > static_cast<uint64_t>(end - p)) {
      return false;
    }
    const uint8_t* value = p;
    const uint8_t* value_end = p + length;
    p = value_end;
    if (field == ef::kFailures) {
      if (!ParseFailure(value, value_end)) return false;
      continue;
    }
    const uint32_t bit = 1u << field;
    if ((seen & bit) != 0) return false;
    seen |= bit;
    bool ok = false;
    switch (field) {
      case ef::kSeqDelta: ok = PackedColumn(value, value_end, &seq_delta_, ZigZag64); break;
      case ef::kTimeDeltaNs: ok = PackedColumn(value, value_end, &time_delta_ns_, ZigZag64); break;
      case ef::kApi: ok = PackedColumn(value, value_end, &api_, u32); break;
      case ef::kAddressDelta: ok = PackedColumn(value, value_end, &address_delta_, ZigZag64); break;
      case ef::kSize: ok = PackedColumn(value, value_end, &size_, u64); break;
      case ef::kStack: ok = PackedColumn(value, value_end, &stack_, u64); break;
      case ef::kThread: ok = PackedColumn(value, value_end, &thread_, u32); break;
      case ef::kDevice: ok = PackedColumn(value, value_end, &device_, ZigZag32); break;
      case ef::kStream: ok = PackedColumn(value, value_end, &stream_, u64); break;
      case ef::kAux: ok = PackedColumn(value, value_end, &aux_, u64); break;
      case ef::kCuptiRows: ok = PackedColumn(value, value_end, &cupti_rows_, u32); break;
      case ef::kThreadRuns: ok = PackedColumn(value, value_end, &thread_runs_, u32); break;
      case ef::kDeviceRuns: ok = PackedColumn(value, value_end, &device_runs_, u32); break;
    }
    if (!ok) return false;
  }
  columns_.seq_delta = seq_delta_.span();
  columns_.time_delta_ns = time_delta_ns_.span();
  columns_.api = api_.span();
  columns_.address_delta = address_delta_.span();
  columns_.size = size_.span();
  columns_.stack = stack_.span();
  columns_.thread = thread_.span();
  columns_.device = device_.span();
  columns_.stream = stream_.span();
  columns_.aux = aux_.span();
  columns_.failures = failures_;
  columns_.cupti_rows = cupti_rows_.span();
  columns_.thread_runs = thread_runs_.span();
  columns_.device_runs = device_runs_.span();
  return true;
}

}  // namespace cumemtrace::analyzer
