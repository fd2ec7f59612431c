#include "analyzer/model/torch/allocator_whatif.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "analyzer/model/memory/cuda_errors.h"
#include "analyzer/model/metadata_visitor.h"
#include "analyzer/model/stacks/python_frame_table.h"
#include "analyzer/model/stacks/stack_table.h"
#include "analyzer/model/stacks/symbol_table.h"
#include "analyzer/model/trace_info.h"
#include "analyzer/model/torch/allocator_replay.h"
#include "analyzer/model/torch/allocator_rules.h"
#include "analyzer/reader/trace_reader.h"
#include "proto/format.h"

namespace cumemtrace::analyzer {
namespace {

// One event of the device that the replay needs: a request, or what the recorded allocator did with the driver.
struct Step {
  enum Kind : uint8_t {
    kAlloc, kOomRequest, kFreeCompleted,  // requests
    kSegmentAlloc, kSegmentFree, kMallocFailed, kSegmentMap, kSegmentUnmap, kMapFailed  // what the allocator did
  };
  uint64_t seq = 0;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  uint64_t stack = 0;
  // Segments: when the driver's figures changed, the cudaMalloc before a SEGMENT_ALLOC or the cudaFree after a
  // SEGMENT_FREE (0: the event's own seq).
  uint64_t driver_seq = 0;
  int32_t device = 0;
  Kind kind = kAlloc;
  // A release made inside a request (under a per-process cap, or garbage collection), as its stack shows, rather
  // than by torch.cuda.empty_cache(): the replay must make it itself.
  bool in_request = false;
  bool IsRequest() const { return kind == kAlloc || kind == kOomRequest; }
  bool IsOutcome() const { return kind >= kSegmentAlloc; }
};

// The driver's figures at one moment: used = total - free, for memory outside PyTorch.
struct DriverFigure {
  uint64_t seq = 0;  // taken after this event
  int32_t device = 0;
  uint64_t used = 0;
  uint64_t total = 0;
};

// The tables that name a release's caller (ReleasedInRequest). A base of InputPass, so that they exist before the
// MetadataVisitor that fills them.
struct InputTables {
  TraceInfo info;
  StackTable stacks;
  SymbolTable symbols;
  PythonFrameTable python_frames;
};

class InputPass : private InputTables, public MetadataVisitor {
 public:
  explicit InputPass(size_t max_steps)
      : MetadataVisitor(info, stacks, symbols, python_frames), max_steps_(max_steps) {}
  void OnAllocatorAttach(const AllocatorAttachInfo& attach) override {
    if (!attached_) config_ = attach.config;
    attached_ = true;
  }
  void OnMemorySample(const MemorySample& s) override {
    if (s.total_bytes >= s.free_bytes && s.total_bytes > 0) {
      figures_.push_back({s.after_seq, s.device, s.total_bytes - s.free_bytes, s.total_bytes});
    }
  }
  void OnEvent(const Event& e) override {
    Step s{e.seq, e.address, e.size, e.stream, e.stack, 0, e.device, Step::kAlloc};
    switch (e.api) {
      case format::Api::kTorchAlloc:
      case format::Api::kTorchAllocGrad:
      case format::Api::kTorchAllocNoGrad: s.kind = Step::kAlloc; break;
      case format::Api::kTorchOom: s.kind = Step::kOomRequest; break;
      // A free whose streams were done at once comes as one event (the tracker's FREE_REQUESTED and
      // FREE_COMPLETED merged): the block returns to the cache there.
      case format::Api::kTorchFreeCompleted:
      case format::Api::kTorchFree:
        s.kind = Step::kFreeCompleted;
        break;
      case format::Api::kTorchSegmentAlloc:
        s.kind = Step::kSegmentAlloc;
        if (last_malloc_.first == e.address) s.driver_seq = last_malloc_.second;
        break;
      case format::Api::kTorchSegmentFree:
        s.kind = Step::kSegmentFree;
        last_segment_free_ = steps_.size();
        break;
      case format::Api::kCudaFree:
        if (e.result == 0 && last_segment_free_ < steps_.size() && steps_[last_segment_free_].address == e.address) {
          steps_[last_segment_free_].driver_seq = e.seq;
        }
        return;
      case format::Api::kTorchSegmentMap: s.kind = Step::kSegmentMap; break;
      case format::Api::kTorchSegmentUnmap: s.kind = Step::kSegmentUnmap; break;
      case format::Api::kCuMemCreate:
        // Pages of an expandable segment: only a creation refused for lack of memory is a decision's outcome.
        if (e.result != kCudaErrorOutOfMemory) return;
        s.kind = Step::kMapFailed;
        break;
      case format::Api::kCudaMalloc:
        if (e.result == 0) last_malloc_ = {e.address, e.seq};
        if (e.result != kCudaErrorOutOfMemory) return;
        s.kind = Step::kMallocFailed;
        if (e.has_mem_info && e.total_bytes >= e.free_bytes) {
          // The failure's own figures, taken right after it (the event's own sequence number).
          figures_.push_back({e.seq, e.device, e.total_bytes - e.free_bytes, e.total_bytes});
        }
        break;
      default:
        return;
    }
    if (steps_.size() >= max_steps_) {
      ++dropped_;  // over the limit: counted, not kept
      return;
    }
    steps_.push_back(s);
  }

  // Marks the releases made inside a request (Step::in_request). Call once the read is done (stacks are known).
  void MarkReleasesInRequests() {
    absl::flat_hash_map<uint64_t, bool> in_request;  // by stack
    for (Step& s : steps_) {
      if (s.kind != Step::kSegmentFree && s.kind != Step::kSegmentUnmap) continue;
      auto [it, inserted] = in_request.try_emplace(s.stack, false);
      if (inserted) it->second = ReleasedInRequest(s.stack);
      s.in_request = it->second;
    }
  }
  const std::string& config() const { return config_; }
  std::vector<Step>& steps() { return steps_; }
  std::vector<DriverFigure>& figures() { return figures_; }
  uint64_t steps_seen() const { return steps_.size() + dropped_; }

 private:
  std::string config_;
  bool attached_ = false;
  size_t max_steps_;
  uint64_t dropped_ = 0;
  std::vector<Step> steps_;
  std::vector<DriverFigure> figures_;
  // Whether the stack of a release names an allocation as its caller: the innermost Python frame is not
  // torch.cuda.empty_cache, or a native frame is the caching allocator's malloc before any emptyCache. A stack that
  // says neither (no frames, no symbols) counts as empty_cache(), as releases without a refusal always did.
  bool ReleasedInRequest(uint64_t stack) const {
    for (uint64_t pc : stacks.Pcs(stack)) {
      if (format::IsPythonFramePc(pc)) {
        // A thread without Python frames (autograd's engine) cannot have called torch.cuda.empty_cache().
        if (format::PythonFrameIdOfPc(pc) == format::kNoPythonFramesId) return true;
        const PythonFrameInfo* frame = python_frames.Find(format::PythonFrameIdOfPc(pc));
        if (frame == nullptr) continue;
        return symbols.String(frame->function) != "empty_cache";
      }
      const SymbolInfo* symbol = symbols.FindSymbol(pc);
      if (symbol == nullptr) continue;
      const std::string& name = symbols.String(symbol->function);
      if (absl::StrContains(name, "emptyCache")) return false;
      if (absl::StrContains(name, "CachingAllocator") && absl::StrContains(name, "malloc")) return true;
    }
    return false;
  }

  std::pair<uint64_t, uint64_t> last_malloc_{0, 0};  // (address, seq) of the last successful cudaMalloc
  size_t last_segment_free_ = SIZE_MAX;              // index in steps_ of the last SEGMENT_FREE
};

// What was outside PyTorch over the run: at each driver figure, used - PyTorch's recorded reserved bytes then.
class OutsideMemory {
 public:
  OutsideMemory(const std::vector<Step>& steps, std::vector<DriverFigure> figures, int32_t device) {
    std::vector<std::pair<uint64_t, uint64_t>> reserved;  // (seq, reserved after it)
    uint64_t now = 0;
    for (const Step& s : steps) {
      const bool grows = s.kind == Step::kSegmentAlloc || s.kind == Step::kSegmentMap;
      const bool shrinks = s.kind == Step::kSegmentFree || s.kind == Step::kSegmentUnmap;
      if (grows) now += s.size;
      if (shrinks) now -= std::min(now, s.size);
      if (grows || shrinks) {
        reserved.push_back({s.driver_seq != 0 ? s.driver_seq : s.seq, now});
      }
    }
    std::sort(reserved.begin(), reserved.end());
    std::sort(figures.begin(), figures.end(), [](const DriverFigure& a, const DriverFigure& b) { return a.seq < b.seq; });
    for (const DriverFigure& f : figures) {
      if (f.device != device) continue;
      auto it = std::upper_bound(reserved.begin(), reserved.end(), std::make_pair(f.seq, UINT64_MAX));
      const uint64_t torch = it == reserved.begin() ? 0 : std::prev(it)->second;
      const uint64_t outside = f.used > torch ? f.used - torch : 0;
      steps_.push_back({f.seq, outside});
      max_ = std::max(max_, outside);
      capacity_ = std::max(capacity_, f.total);
    }
  }
  // Outside memory at the moment of event `seq`: the latest figure taken at or before it, else the first.
  uint64_t At(uint64_t seq) const {
    if (steps_.empty()) return 0;
    auto it = std::upper_bound(steps_.begin(), steps_.end(), std::make_pair(seq, UINT64_MAX));
    return it == steps_.begin() ? steps_.front().second : std::prev(it)->second;
  }
  uint64_t max() const { return max_; }
  uint64_t capacity() const { return capacity_; }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> steps_;  // (seq, outside bytes)
  uint64_t max_ = 0;
  uint64_t capacity_ = 0;
};

// The recorded run's driver: answers each request for memory as it was answered, and says where the replay differs.
class RecordedDriver : public ReplayDriver {
 public:
  // `releases_show_cap`: cache released inside a request shows a cap's refusal (false when the recorded run also
  // collected garbage under a cap the replay does not know: such a release says nothing of the cap).
  RecordedDriver(const std::vector<Step>& steps, FidelityCheck* fidelity, bool releases_show_cap)
      : steps_(steps), fidelity_(fidelity), releases_show_cap_(releases_show_cap) {
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i].IsOutcome()) outcomes_.push_back(i);
    }
  }
  // The request being served: outcomes it may consume come before `seq`.
  void Serving(uint64_t seq, bool recorded_oom) {
    serving_seq_ = seq;
    serving_recorded_oom_ = recorded_oom;
  }
  bool CapAllows(uint64_t reserved_now, uint64_t alloc_size) override {
    const Step* o = NextBefore();
    if (releases_show_cap_ && o != nullptr && o->in_request &&
        (o->kind == Step::kSegmentFree || o->kind == Step::kSegmentUnmap)) {
      // The recorded allocator released cache inside this request with no refusal by the driver: a cap refused
      // reserved + the segment size, and releasing made room (a retry follows).
      NoteCapRefusal(reserved_now + alloc_size - 1);
      return false;
    }
    const bool driver_asked = o != nullptr && o->kind != Step::kSegmentFree && o->kind != Step::kSegmentUnmap;
    if (!serving_recorded_oom_ || driver_asked) {
      // The cap (if any) let it through: it is at least this.
      fidelity_->cap_low = std::max(fidelity_->cap_low, reserved_now + alloc_size);
      return true;
    }
    // A request the recorded run failed without asking the driver was refused by a cap (a memory fraction):
    // reserved + the segment size went over it.
    NoteCapRefusal(reserved_now + alloc_size - 1);
    return false;
  }
  void NoteCapRefusal(uint64_t over) {
    if (serving_seq_ != last_capped_seq_) ++fidelity_->capped_refusals;
    last_capped_seq_ = serving_seq_;
    fidelity_->cap_high = fidelity_->cap_high == 0 ? over : std::min(fidelity_->cap_high, over);
  }
  bool Malloc(uint64_t size, uint64_t, uint64_t* address) override {
    if (const Step* o = NextBefore(); o != nullptr && o->size == size) {
      if (o->kind == Step::kSegmentAlloc) {
        Consume();
        *address = o->address;
        return true;
      }
      if (o->kind == Step::kMallocFailed) {
        ++cursor_;
        return false;
      }
    }
    Diverge(absl::StrCat("the replay asks the driver for a segment of ", size, " bytes; the recorded allocator ",
                         Describe(Next())));
    return false;
  }
  void Free(uint64_t address, uint64_t size) override {
    if (const Step* o = Next(); o != nullptr && o->kind == Step::kSegmentFree && o->address == address) {
      Consume();
      return;
    }
    Diverge(absl::StrCat("the replay releases the segment of ", size, " bytes at 0x", absl::Hex(address),
                         "; the recorded allocator ", Describe(Next())));
  }
  // A new expandable segment starts where the recorded allocator mapped its first pages.
  uint64_t Reserve(uint64_t) override {
    if (const Step* o = NextBefore(); o != nullptr && o->kind == Step::kSegmentMap) return o->address;
    Diverge(absl::StrCat("the replay reserves a new expandable segment; the recorded allocator ", Describe(Next())));
    return uint64_t{1} << 46;
  }
  bool Map(uint64_t address, uint64_t size, uint64_t) override {
    if (const Step* o = NextBefore(); o != nullptr) {
      if (o->kind == Step::kSegmentMap && o->address == address && o->size == size) {
        Consume();
        return true;
      }
      if (o->kind == Step::kMapFailed) {
        ++cursor_;
        return false;
      }
    }
    Diverge(absl::StrCat("the replay maps ", size, " bytes at 0x", absl::Hex(address), "; the recorded allocator ",
                         Describe(Next())));
    return false;
  }
  void Unmap(uint64_t address, uint64_t size) override {
    if (const Step* o = Next(); o != nullptr && o->kind == Step::kSegmentUnmap && o->address == address &&
                                o->size == size) {
      Consume();
      return;
    }
    Diverge(absl::StrCat("the replay unmaps ", size, " bytes at 0x", absl::Hex(address), "; the recorded allocator ",
                         Describe(Next())));
  }
  // The next recorded outcome not consumed yet, or nullptr; NextBefore: only if it came before the request.
  const Step* Next() const { return cursor_ < outcomes_.size() ? &steps_[outcomes_[cursor_]] : nullptr; }
  const Step* NextBefore() const {
    const Step* o = Next();
    return o != nullptr && o->seq < serving_seq_ ? o : nullptr;
  }
  void Diverge(std::string why) {
    if (diverged()) return;
    fidelity_->exact = false;
    fidelity_->diverged_seq = serving_seq_;
    fidelity_->divergence = std::move(why);
  }
  bool diverged() const { return !fidelity_->divergence.empty(); }

 private:
  void Consume() {
    ++cursor_;
    ++fidelity_->segments;
  }
  static std::string Describe(const Step* o) {
    if (o == nullptr) return "asked for nothing more";
    const std::string at = absl::StrCat(" at 0x", absl::Hex(o->address), " next (event ", o->seq, ")");
    switch (o->kind) {
      case Step::kSegmentAlloc: return absl::StrCat("made a segment of ", o->size, " bytes", at);
      case Step::kSegmentFree: return absl::StrCat("released the segment of ", o->size, " bytes", at);
      case Step::kSegmentMap: return absl::StrCat("mapped ", o->size, " bytes", at);
      case Step::kSegmentUnmap: return absl::StrCat("unmapped ", o->size, " bytes", at);
      case Step::kMapFailed: return absl::StrCat("failed to map memory next (event ", o->seq, ")");
      default: return absl::StrCat("failed a cudaMalloc of ", o->size, " bytes next (event ", o->seq, ")");
    }
  }

  const std::vector<Step>& steps_;
  FidelityCheck* fidelity_;
  bool releases_show_cap_;
  std::vector<size_t> outcomes_;
  size_t cursor_ = 0;
  uint64_t serving_seq_ = 0;
  bool serving_recorded_oom_ = false;
  uint64_t last_capped_seq_ = 0;
};

// A card of `capacity` bytes, of which `outside` holds what is not PyTorch's at each moment, and a per-process
// cap on PyTorch's reserved bytes (0 = none).
class CapacityDriver : public ReplayDriver {
 public:
  CapacityDriver(uint64_t capacity, const OutsideMemory* outside, uint64_t cap)
      : capacity_(capacity), outside_(outside), cap_(cap) {}
  void Serving(uint64_t seq) { seq_ = seq; }
  uint64_t cap() const { return cap_; }
  uint64_t OutsideNow() const { return outside_ != nullptr ? outside_->At(seq_) : 0; }
  bool CapAllows(uint64_t reserved_now, uint64_t alloc_size) override {
    return cap_ == 0 || reserved_now + alloc_size <= cap_;
  }
  bool Malloc(uint64_t size, uint64_t reserved_now, uint64_t* address) override {
    if (!Fits(reserved_now, size)) return false;
    *address = next_address_;
    next_address_ += (size + kTorchRoundLarge - 1) / kTorchRoundLarge * kTorchRoundLarge + kTorchRoundLarge;
    return true;
  }
  void Free(uint64_t, uint64_t) override {}
  uint64_t Reserve(uint64_t size) override {
    const uint64_t base = next_range_;
    next_range_ += (size + (uint64_t{1} << 30)) & ~((uint64_t{1} << 30) - 1);
    return base;
  }
  bool Map(uint64_t, uint64_t size, uint64_t reserved_now) override { return Fits(reserved_now, size); }
  void Unmap(uint64_t, uint64_t) override {}

 private:
  bool Fits(uint64_t reserved_now, uint64_t size) const { return reserved_now + size + OutsideNow() <= capacity_; }

  uint64_t capacity_;
  const OutsideMemory* outside_;
  uint64_t cap_;
  uint64_t seq_ = 0;
  // Made-up addresses, in allocation order: segments above any real one, reserved ranges above those.
  uint64_t next_address_ = uint64_t{1} << 44;
  uint64_t next_range_ = uint64_t{1} << 47;
};

// Segment frees and unmappings that no refusal by the driver before them explains, and that were not made inside a
// request (Step::in_request: a cap's refusal or garbage collection, which the replay makes itself), start an
// empty_cache(): marks the first of each run.
std::vector<bool> EmptyCacheStarts(const std::vector<Step>& steps) {
  std::vector<bool> starts(steps.size(), false);
  bool failed_since_request = false, previous_was_empty_cache = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    const bool release = (s.kind == Step::kSegmentFree || s.kind == Step::kSegmentUnmap) && !s.in_request;
    if (s.IsRequest() || s.kind == Step::kFreeCompleted) failed_since_request = false;
    if (s.kind == Step::kMallocFailed || s.kind == Step::kMapFailed) failed_since_request = true;
    const bool empty_cache = release && !failed_since_request;
    starts[i] = empty_cache && !previous_was_empty_cache;
    if (!release) previous_was_empty_cache = false;
    if (empty_cache) previous_was_empty_cache = true;
  }
  return starts;
}

// Replays the requests of `steps` under `config`. With `recorded` (and `fidelity`), the recorded driver answers
// and every decision is checked; with `capacity`, the capacity model answers and the replay stops at the first
// request that fails.
ReplayOutcome Replay(const std::vector<Step>& steps, const AllocatorConfig& config, RecordedDriver* recorded,
                     FidelityCheck* fidelity, CapacityDriver* capacity, uint64_t card) {
  ReplayDriver* driver = recorded != nullptr ? static_cast<ReplayDriver*>(recorded) : capacity;
  CachingAllocatorReplay replay(config, driver, card);
  // The cap garbage collection is a share of: the capacity model's, or in a fidelity replay the recorded
  // setting's (a fraction set from Python is not in the trace: then none, and a collection the run made diverges).
  replay.SetMemoryCap(capacity != nullptr ? capacity->cap() : TorchFractionCap(config, card));
  ReplayOutcome out;
  out.ran = true;
  out.headroom = card;
  const std::vector<bool> empty_cache = EmptyCacheStarts(steps);
  std::map<uint64_t, uint64_t> replayed_at;  // recorded block address -> replayed address (capacity model)
  uint64_t made_up_id = 0;
  if (fidelity != nullptr) fidelity->exact = true;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (recorded != nullptr && recorded->diverged()) break;
    if (recorded != nullptr) recorded->Serving(s.seq, s.kind == Step::kOomRequest);
    if (capacity != nullptr) capacity->Serving(s.seq);
    if (s.IsOutcome()) {
      // Consumed by the request that follows (the tracker reports a segment before the block in it), or, for a
      // segment released with no failed cudaMalloc before it, the start of an empty_cache().
      if (empty_cache[i]) replay.ReleaseCachedSegments();
      continue;
    }
    if (s.kind == Step::kFreeCompleted) {
      uint64_t address = s.address;
      if (recorded == nullptr) {
        auto it = replayed_at.find(s.address);
        if (it == replayed_at.end()) continue;  // a block the replay never served (it failed, or predates it)
        address = it->second;
        replayed_at.erase(it);
      }
      if (!replay.Free(address) && recorded != nullptr) {
        recorded->Diverge(absl::StrCat("the recorded run freed the block at 0x", absl::Hex(s.address), " (event ",
                                       s.seq, "), which the replay does not hold"));
      }
      continue;
    }
    const CachingAllocatorReplay::Served served = replay.Malloc(s.size, s.stream);
    if (served.ok) ++out.requests;
    if (served.recovered) ++out.recovered;
    if (recorded != nullptr) {
      if (recorded->diverged()) break;
      if (s.kind == Step::kAlloc && !served.ok) {
        recorded->Diverge(absl::StrCat("the replay runs out of memory at a request of ", s.size,
                                       " bytes that the recorded run served (event ", s.seq, ")"));
      } else if (s.kind == Step::kOomRequest && served.ok) {
        recorded->Diverge(absl::StrCat("the replay serves the request of ", s.size,
                                       " bytes that the recorded run failed (event ", s.seq, ")"));
      } else if (s.kind == Step::kAlloc && served.address != s.address) {
        recorded->Diverge(absl::StrCat("the replay places the block of event ", s.seq, " at 0x",
                                       absl::Hex(served.address), ", the recorded allocator at 0x",
                                       absl::Hex(s.address)));
      } else if (recorded->Next() != nullptr && recorded->Next()->seq < s.seq) {
        recorded->Diverge(absl::StrCat("the recorded allocator made a decision (event ", recorded->Next()->seq,
                                       ") that the replay did not make while serving event ", s.seq));
      }
      if (recorded->diverged()) break;
      if (s.kind == Step::kAlloc) ++fidelity->blocks;
      ++fidelity->requests;
      if (served.ok && !out.oom) {
        out.reserved_peak = replay.reserved_peak();
        out.allocated_peak = replay.allocated_peak();
      }
      if (!served.ok && !out.oom) {
        out.oom = true;
        out.failed_seq = s.seq;
        out.failed_size = s.size;
        out.failed_stack = s.stack;
      }
      continue;
    }
    const uint64_t outside = capacity->OutsideNow();
    if (!served.ok) {
      out.oom = true;
      out.failed_seq = s.seq;
      out.failed_size = s.size;
      out.failed_stack = s.stack;
      out.reserved_at_failure = replay.reserved();
      out.allocated_at_failure = replay.allocated();
      out.largest_free_at_failure = replay.largest_free_block();
      out.outside_at_failure = outside;
      break;
    }
    replayed_at[s.kind == Step::kAlloc ? s.address : (uint64_t{1} << 63) + made_up_id++] = served.address;
    out.reserved_peak = replay.reserved_peak();
    out.allocated_peak = replay.allocated_peak();
    const uint64_t used = replay.reserved() + outside;
    out.headroom = std::min(out.headroom, used < card ? card - used : 0);
  }
  if (recorded != nullptr && !recorded->diverged() && recorded->Next() != nullptr) {
    recorded->Diverge(absl::StrCat("the recorded allocator made a decision (event ", recorded->Next()->seq,
                                   ") after the last request that the replay did not make"));
  }
  return out;
}

}  // namespace

// What a replay needs of the trace, for the device replayed.
struct ReplayInput {
  int32_t device = 0;
  std::string config;
  std::vector<Step> steps;  // by seq
  std::vector<DriverFigure> figures;
};

void ReplayInputDeleter::operator()(ReplayInput* input) const { delete input; }

std::string ReplayTooLong(uint64_t steps, size_t max_events) {
  return absl::StrCat("the trace has ", steps, " allocator events, more than the ", max_events,
                      " a replay made by the way holds (about 56 bytes each): run cumem-analyze whatif on it");
}

absl::StatusOr<ReplayInputPtr> ReadReplayInput(const std::string& path, size_t max_events) {
  InputPass pass(max_events);
  ReadStats stats;
  if (absl::Status s = ReadTrace(path, pass, &stats); !s.ok()) return s;
  if (pass.steps_seen() > max_events) {
    return absl::ResourceExhaustedError(ReplayTooLong(pass.steps_seen(), max_events));
  }
  pass.MarkReleasesInRequests();
  std::vector<Step>& all = pass.steps();
  // The device: that of the first OOM, else of the first request.
  const Step* first = nullptr;
  for (const Step& s : all) {
    if (s.kind == Step::kOomRequest) {
      first = &s;
      break;
    }
    if (first == nullptr && s.kind == Step::kAlloc) first = &s;
  }
  if (first == nullptr) {
    return absl::InvalidArgumentError(
        "the trace has no PyTorch allocator events to replay (a PyTorch program traced with "
        "CUMEMTRACE_TORCH_BLOCKS=1, the default, has them)");
  }
  ReplayInputPtr input(new ReplayInput);
  input->device = first->device;
  for (const Step& s : all) {
    if (s.device == input->device) input->steps.push_back(s);
  }
  all.clear();
  all.shrink_to_fit();
  std::sort(input->steps.begin(), input->steps.end(), [](const Step& a, const Step& b) { return a.seq < b.seq; });
  input->config = pass.config();
  input->figures = std::move(pass.figures());
  return input;
}

WhatIf ReplayWhatIf(const ReplayInput& input, const WhatIfOptions& options) {
  const std::vector<Step>& steps = input.steps;
  WhatIf w;
  w.device = input.device;
  w.recorded_settings = input.config;
  std::vector<std::string> settings;
  if (!w.recorded_settings.empty()) settings.push_back(w.recorded_settings);
  settings.insert(settings.end(), options.settings.begin(), options.settings.end());
  w.settings = absl::StrJoin(settings, ",");
  const AllocatorConfig recorded_config = ParseAllocatorConfig(w.recorded_settings);
  const AllocatorConfig whatif_config = ParseAllocatorConfig(w.settings);
  for (const Step& s : steps) {
    if (s.IsRequest()) ++w.torch_requests;
    if (s.kind == Step::kOomRequest && !w.recorded_oom) {
      w.recorded_oom = true;
      w.recorded_oom_seq = s.seq;
    }
  }
  {
    uint64_t reserved = 0;
    for (const Step& s : steps) {
      if (s.kind == Step::kSegmentAlloc || s.kind == Step::kSegmentMap) reserved += s.size;
      if (s.kind == Step::kSegmentFree || s.kind == Step::kSegmentUnmap) reserved -= std::min(reserved, s.size);
      w.recorded_reserved_peak = std::max(w.recorded_reserved_peak, reserved);
    }
  }
  const OutsideMemory outside(steps, input.figures, w.device);
  w.recorded_capacity = outside.capacity();
  w.outside_max = outside.max();
  w.capacity = options.capacity.value_or(w.recorded_capacity);
  w.without_outside = options.without_outside;

  std::string unsupported = ReplayUnsupported(recorded_config);
  const std::string whatif_unsupported = ReplayUnsupported(whatif_config);
  w.unsupported = !unsupported.empty() ? unsupported : whatif_unsupported;
  if (!unsupported.empty()) return w;  // nothing can be checked against the recorded run

  const uint64_t recorded_cap = TorchFractionCap(recorded_config, w.recorded_capacity);
  RecordedDriver recorded(steps, &w.fidelity, recorded_config.garbage_collection_threshold == 0 || recorded_cap != 0);
  Replay(steps, recorded_config, &recorded, &w.fidelity, nullptr, w.recorded_capacity);
  if (!w.fidelity.exact && recorded_config.garbage_collection_threshold > 0 && recorded_cap == 0) {
    if (recorded_config.per_process_memory_fraction > 0 && w.recorded_capacity == 0) {
      w.notes.push_back(
          "the recorded run has garbage_collection_threshold under a per-process memory fraction, but the trace "
          "holds no figure of the card's memory, so the cap (and the replay's collections) is unknown");
    } else {
      w.notes.push_back(
          "the recorded run has garbage_collection_threshold, whose collections depend on a per-process memory "
          "fraction; one set from Python (torch.cuda.set_per_process_memory_fraction) is not in the trace, so the "
          "replay cannot make them (set it as PYTORCH_CUDA_ALLOC_CONF's per_process_memory_fraction to record it)");
    }
  }
  if (w.recorded_capacity == 0 && !options.capacity.has_value()) return w;  // no capacity to model

  // A cap seen in the recorded run stays in every replay (it is the program's own setting), at each of its bounds;
  // a fraction in the settings gives it exactly.
  const FidelityCheck& f = w.fidelity;
  const bool capped = f.capped_refusals > 0 && recorded_cap == 0;
  if (capped && f.cap_low > f.cap_high) {
    w.cap_bounds_agree = false;  // no single cap explains the run: nothing that depends on it is claimed
    w.notes.push_back("the memory cap's bounds the run shows contradict each other: no what-if depends on it");
  }
  auto same = [](const ReplayOutcome& a, const ReplayOutcome& b) {
    return a.oom == b.oom && a.failed_seq == b.failed_seq;
  };
  if (w.recorded_capacity != 0) {
    CapacityDriver low(w.recorded_capacity, &outside, capped ? f.cap_low : recorded_cap);
    w.capacity_check = Replay(steps, recorded_config, nullptr, nullptr, &low, w.recorded_capacity);
    if (capped) {
      CapacityDriver high(w.recorded_capacity, &outside, f.cap_high);
      const ReplayOutcome at_high = Replay(steps, recorded_config, nullptr, nullptr, &high, w.recorded_capacity);
      if (!same(at_high, w.capacity_check)) w.capacity_check.oom = !w.recorded_oom;  // not reproduced at both
    }
    w.capacity_model_agrees = w.capacity_check.oom == w.recorded_oom &&
                              (!w.recorded_oom || w.capacity_check.failed_seq == w.recorded_oom_seq);
  }
  if (!whatif_unsupported.empty() || w.capacity == 0) return w;
  const OutsideMemory* outside_memory = options.without_outside ? nullptr : &outside;
  const uint64_t whatif_cap = TorchFractionCap(whatif_config, w.capacity);
  const bool whatif_capped = capped && whatif_cap == 0;
  CapacityDriver model(w.capacity, outside_memory, whatif_cap != 0 ? whatif_cap : capped ? f.cap_low : 0);
  w.whatif_cap = model.cap();
  if (whatif_config.garbage_collection_threshold > 0 && model.cap() == 0) {
    w.notes.push_back(
        "garbage_collection_threshold acts only under a per-process memory fraction, and none is known for this "
        "run: the replay runs without it, as PyTorch would. A fraction set from Python "
        "(torch.cuda.set_per_process_memory_fraction) is not in the trace: name it with --set "
        "per_process_memory_fraction:F");
  }
  w.whatif = Replay(steps, whatif_config, nullptr, nullptr, &model, w.capacity);
  if (whatif_capped) {
    CapacityDriver high(w.capacity, outside_memory, f.cap_high);
    const ReplayOutcome at_high = Replay(steps, whatif_config, nullptr, nullptr, &high, w.capacity);
    w.cap_bounds_agree = w.cap_bounds_agree && same(at_high, w.whatif);
  }
  return w;
}

absl::StatusOr<WhatIf> ReplayWhatIf(const std::string& path, const WhatIfOptions& options) {
  absl::StatusOr<ReplayInputPtr> input = ReadReplayInput(path);
  if (!input.ok()) return input.status();
  return ReplayWhatIf(**input, options);
}

}  // namespace cumemtrace::analyzer
