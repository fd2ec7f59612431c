// MemoryModel::Apply, the rules of memory_model.h. Must never let a bad trace drive counters negative: only live
// entries are ever subtracted.
#include "analyzer/model/memory/memory_model.h"

namespace cumemtrace::analyzer {

Outcome MemoryModel::Apply(const Event& e) {
  Outcome out;
  const EventStamp when{stats_.events, e.time_ns, e.seq};
  ++stats_.events;
  const format::ApiInfo* info = e.info;
  if (info == nullptr) return out;
  if (info->op == format::Op::kAlloc) {
    if (e.result != 0) {
      ++stats_.failed_allocations;
      out.effect = Effect::kFailedAlloc;
      return out;
    }
    Allocation a;
    a.size = e.size;
    a.stack = e.stack;
    a.time_ns = e.time_ns;
    a.seq = e.seq;
    a.device = e.device;
    a.thread = e.thread;
    a.api = e.api;
    a.kind = info->kind;
    a.space = info->space;
    a.index = when.index;
    ++stats_.allocations;
    if (live_.Insert(e.address, a, &out.previous)) {
      ++stats_.overwritten;
      out.has_previous = true;
      out.effect = Effect::kReplaced;
      timelines_.Remove(out.previous);
    } else {
      out.effect = Effect::kAllocated;
    }
    timelines_.Add(a, when);
    return out;
  }
  if (info->op == format::Op::kFree) {
    if (e.result != 0) {
      ++stats_.failed_frees;
      out.effect = Effect::kFailedFree;
      if (const Allocation* live = live_.Find(info->space, e.address); live != nullptr) {
        out.previous = *live;
        out.has_previous = true;
      }
      return out;
    }
    if (live_.Remove(info->space, e.address, &out.previous)) {
      ++stats_.frees;
      out.has_previous = true;
      out.effect = Effect::kFreed;
      timelines_.Remove(out.previous);
    } else if (info->space == format::Space::kTorchBlock) {
      ++stats_.predating_torch_frees;  // allocated before the tracker was attached (allocator_layer.h)
      out.effect = Effect::kUnmatchedFree;
    } else {
      ++stats_.unmatched_frees;
      out.effect = Effect::kUnmatchedFree;
    }
  }
  return out;
}

}  // namespace cumemtrace::analyzer
