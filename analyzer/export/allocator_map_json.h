// PyTorch's segments and blocks at one moment (model/torch/allocator_map.h) as the HTML page's "allocator" member:
// the block map at an OOM, where the holes (free blocks none of which fits the request) can be seen.
#ifndef CUMEMTRACE_ANALYZER_EXPORT_ALLOCATOR_MAP_JSON_H_
#define CUMEMTRACE_ANALYZER_EXPORT_ALLOCATOR_MAP_JSON_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "analyzer/model/torch/allocator_map.h"

namespace cumemtrace::analyzer {

// {"device", "seq", "request", "segments": [{"size", "expandable", "blocks": [[offset, size, state]...]}...],
//  "blocks_left_out"}: segments largest first; state 0 allocated, 1 waiting for its streams, 2 free. At most
// `max_blocks` blocks are listed (whole segments), the rest counted.
std::string AllocatorMapJson(const AllocatorMap& map, int32_t device, uint64_t request, size_t max_blocks);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_EXPORT_ALLOCATOR_MAP_JSON_H_
