#include "analyzer/export/allocator_map_json.h"

#include <algorithm>
#include <vector>

#include "analyzer/render/json/json_writer.h"

namespace cumemtrace::analyzer {

std::string AllocatorMapJson(const AllocatorMap& map, int32_t device, uint64_t request, size_t max_blocks) {
  std::vector<const TorchSegmentView*> segments;
  for (const TorchSegmentView& s : map.segments) segments.push_back(&s);
  std::stable_sort(segments.begin(), segments.end(),
                   [](const TorchSegmentView* x, const TorchSegmentView* y) { return x->size > y->size; });
  std::string out;
  JsonWriter w(&out, 0);
  w.BeginObject();
  w.Member("device", device);
  w.Member("seq", map.last_seq);
  w.Member("request", request);
  w.Key("segments");
  w.BeginArray();
  size_t listed = 0;
  uint64_t left_out = 0;
  for (const TorchSegmentView* s : segments) {
    if (listed + s->blocks.size() > max_blocks) {
      left_out += s->blocks.size();
      continue;
    }
    listed += s->blocks.size();
    w.BeginObject();
    w.Member("size", s->size);
    w.Member("expandable", s->expandable);
    w.Key("blocks");
    w.BeginArray();
    for (const TorchBlockView& b : s->blocks) {
      w.BeginArray();
      w.Uint(b.address - s->address);
      w.Uint(b.block.size);
      w.Int(static_cast<int>(b.block.state));
      w.EndArray();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Member("blocks_left_out", left_out);
  w.EndObject();
  return out;
}

}  // namespace cumemtrace::analyzer
