// The per-api column layout of event batches for the hot decoding loop (which columns a row of each api has),
// built at compile time from proto/format.h's api index. It must never hold a second copy of what an api means:
// format.h's kApiTable is the only one.
#ifndef CUMEMTRACE_ANALYZER_READER_API_LOOKUP_H_
#define CUMEMTRACE_ANALYZER_READER_API_LOOKUP_H_

#include <cstdint>

#include "proto/format.h"

namespace cumemtrace::analyzer {

using format::kApiIndex;
using format::kApiIndexSize;

// Returns the table row for `api`, or nullptr for a value this version does not know.
inline const format::ApiInfo* LookupApi(uint32_t api) { return format::FindApi(api); }

// Which per-api columns a row of `api` has: bit 0 size (allocations), bit 1 stream, bit 2 aux; 0 for an unknown api.
inline constexpr uint8_t kColumnSize = 1, kColumnStream = 2, kColumnAux = 4;
inline constexpr uint8_t ColumnsOf(const format::ApiInfo* info) {
  if (info == nullptr) return 0;
  return static_cast<uint8_t>((info->has_size ? kColumnSize : 0) |
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
  return api < kApiIndexSize ? kApiColumns.entries[api] : 0;
}

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_READER_API_LOOKUP_H_
