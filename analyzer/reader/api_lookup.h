// Constant-time api -> format::ApiInfo lookup for the hot decoding loop. format::FindApi scans the table row by
// row; this is a direct index built at compile time from that same table. It must never hold a second copy of
// what an api means: proto/format.h's kApiTable is the only one.
#ifndef CUMEMTRACE_ANALYZER_READER_API_LOOKUP_H_
#define CUMEMTRACE_ANALYZER_READER_API_LOOKUP_H_

#include <cstdint>

#include "proto/format.h"

namespace cumemtrace::analyzer {

inline constexpr uint32_t kApiIndexSize = 128;

struct ApiIndex {
  const format::ApiInfo* entries[kApiIndexSize];
};

inline constexpr ApiIndex MakeApiIndex() {
  ApiIndex index{};
  for (const format::ApiInfo& info : format::kApiTable) {
    const auto value = static_cast<uint32_t>(info.api);
    if (value < kApiIndexSize) index.entries[value] = &info;
  }
  return index;
}

inline constexpr ApiIndex kApiIndex = MakeApiIndex();

// Returns the table row for `api`, or nullptr for a value this version does not know.
inline const format::ApiInfo* LookupApi(uint32_t api) {
  return api < kApiIndexSize ? kApiIndex.entries[api] : format::FindApi(api);
}

// Which per-api columns a row of `api` has: bit 0 size (allocations), bit 1 stream, bit 2 aux; 0 for an unknown api.
inline constexpr uint8_t kColumnSize = 1, kColumnStream = 2, kColumnAux = 4;
inline constexpr uint8_t ColumnsOf(const format::ApiInfo* info) {
  if (info == nullptr) return 0;
  return static_cast<uint8_t>((info->op == format::Op::kAlloc ? kColumnSize : 0) |
                              (info->has_stream ? kColumnStream : 0) | (info->has_aux ? kColumnAux : 0));
}
struct ApiColumns {
  uint8_t entries[kApiIndexSize];
};
inline constexpr ApiColumns MakeApiColumns() {
  ApiColumns columns{};
  for (uint32_t i = 0; i < kApiIndexSize; ++i) columns.entries[i] = ColumnsOf(kApiIndex.entries[i]);
  return columns;
}
inline constexpr ApiColumns kApiColumns = MakeApiColumns();
inline uint8_t LookupColumns(uint32_t api) {
  return api < kApiIndexSize ? kApiColumns.entries[api] : ColumnsOf(format::FindApi(api));
}

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_READER_API_LOOKUP_H_
