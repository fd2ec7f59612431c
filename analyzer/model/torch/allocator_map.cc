// AllocatorMapAt (see allocator_map.h): one read of the trace with a visitor that feeds the allocator layer alone.
#include "analyzer/model/torch/allocator_map.h"

#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {
namespace {

class MapPass : public TraceVisitor {
 public:
  explicit MapPass(uint64_t seq) : seq_(seq) {}

  void OnAllocatorAttach(const AllocatorAttachInfo& attach) override {
    if (!attached_) layer_.SetConfig(ParseAllocatorConfig(attach.config));
    attached_ = true;
  }
  void OnEvent(const Event& e) override {
    const uint64_t index = index_++;
    if (e.seq > seq_ || !format::IsTorchApi(e.api)) return;
    layer_.Apply(e, index);
    last_seq_ = e.seq;
    ++events_;
  }

  AllocatorMap Result(int32_t device) const {
    AllocatorMap m;
    m.last_seq = last_seq_;
    m.events = events_;
    m.figures = layer_.Figures(device);
    m.segments = layer_.Map(device);
    return m;
  }

 private:
  const uint64_t seq_;
  AllocatorLayer layer_;
  bool attached_ = false;
  uint64_t index_ = 0;
  uint64_t last_seq_ = 0;
  uint64_t events_ = 0;
};

}  // namespace

absl::StatusOr<AllocatorMap> AllocatorMapAt(const std::string& path, int32_t device, uint64_t seq) {
  MapPass pass(seq);
  ReadStats stats;
  if (absl::Status s = ReadTrace(path, pass, &stats); !s.ok()) return s;
  return pass.Result(device);
}

}  // namespace cumemtrace::analyzer
