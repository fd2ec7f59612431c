// The pass over a trace that builds an Analysis: collects metadata, stacks and symbols, replays the memory model,
// keeps failed allocations with what was live then, logs pinned host changes, and at the end reads off each
// timeline's peak with what was live at it and what is still live (leaks). Internal to analysis.cc.
#ifndef CUMEMTRACE_ANALYZER_MODEL_SCAN_PASS_H_
#define CUMEMTRACE_ANALYZER_MODEL_SCAN_PASS_H_

#include <deque>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

#include "analyzer/model/torch/allocator_layer.h"
#include "analyzer/model/torch/layer_thread.h"
#include "analyzer/model/torch/step_phases.h"
#include "analyzer/model/analysis.h"
#include "analyzer/model/usage/driver_memory.h"
#include "analyzer/model/metadata_visitor.h"
#include "analyzer/model/usage/owners.h"

namespace cumemtrace::analyzer {

class ScanPass : public MetadataVisitor {
 public:
  // `detected_phases`: training and validation found by an earlier ScanPass of the same trace (empty: none yet;
  // this pass looks for them when the trace has no NVTX ranges).
  ScanPass(Analysis& analysis, const AnalyzeOptions& options, const std::vector<PhaseInfo>& detected_phases)
      : MetadataVisitor(analysis.info, analysis.stacks, analysis.symbols, analysis.python_frames),
        a_(analysis),
        options_(options),
        detect_phases_(detected_phases.empty()) {
    for (const PhaseInfo& p : detected_phases) phases_.AddDetected(p);
  }
  void OnMemorySample(const MemorySample& sample) override { driver_.Add(sample, owners_); }
  void OnThread(const ThreadInfo& thread) override {
    MetadataVisitor::OnThread(thread);
    Thread(thread.index).engine = -1;  // its name may have changed
  }
  void OnPhase(const PhaseInfo& phase) override;
  void OnReadProgress(uint64_t bytes_read, uint64_t file_bytes) override;
  void OnAllocatorAttach(const AllocatorAttachInfo& attach) override;
  void OnEvent(const Event& event) override;
  void OnEvents(absl::Span<const Event> events) override;

  // Fills peaks, leaks, failed allocations and (unless the log overflowed) pinned windows. Call once, after the
  // read. Returns false if the pinned changes need a second read (PinnedPass).
  bool Finish();

  // The reader's thread applies queued PyTorch events to the allocator layer while it waits (LayerThread::kShared).
  bool HelpWhileReaderWaits() override { return layer_.HelpOnce(); }

  // Who replays PyTorch's allocator under `threading` here (this process's CPUs).
  static LayerThread::Mode LayerThreadMode(LayerThreading threading);

 private:
  void FinishLeaks();
  void FinishAllocator();
  void ApplyTorch(const Event& event, uint64_t index);
  // What the scan keeps per thread, found by index for every PyTorch event (a vector, not a hash map: thread
  // indexes are handed out from 0; an index past kIndexedThreads, which only damage makes, goes to a map).
  struct ThreadScan {
    int8_t engine = -1;  // 1: one of autograd's engine threads (by its name), 0: not, -1: not looked up yet
    uint64_t request_boundary = 0;  // the sequence number of its last PyTorch block row: a request's driver and
                                    // segment rows come after it
  };
  static constexpr uint32_t kIndexedThreads = 1 << 16;
  ThreadScan& Thread(uint32_t thread) {
    if (thread >= kIndexedThreads) return far_threads_[thread];
    if (thread >= threads_.size()) threads_.resize(thread + 1);
    return threads_[thread];
  }
  // Thread `thread` (whose ThreadScan is `scan`) is one of autograd's engine threads (by its name, looked up once
  // per thread, not per block).
  bool EngineThread(ThreadScan& scan, uint32_t thread);
  // The allocator's state on `device` now, and what else holds that device's memory.
  TorchAtFailure AtFailure(int32_t device);
  bool IsPytorchStack(uint64_t stack) { return owners_.Name(owners_.OwnerOf(stack)).slug == "pytorch"; }
  void After(const Event& event, const Outcome& outcome, uint64_t index) {
    if (phases_.active()) {
      phases_.After(event, index, model_.timelines());
    } else {
      last_event_ = EventStamp{index, event.time_ns, event.seq};  // for a first phase that comes after it
    }
    a_.info.NoteEventTime(event.time_ns);
    driver_.Before(event.seq, owners_);  // samples taken before this event see the owners' state without it
    owners_.Apply(event, outcome);
    if (format::IsTorchApi(event.api)) ApplyTorch(event, index);
    if (outcome.effect == Effect::kFailedAlloc && phases_.Inside(index)) KeepOom(event, index);
    if (options_.allocation_totals &&
        (outcome.effect == Effect::kAllocated || outcome.effect == Effect::kReplaced) && phases_.Inside(index)) {
      AllocationTotal& t = allocation_totals_[{event.device, event.info->kind, event.stack}];
      ++t.count;
      t.bytes += event.size;
    }
    // Most events touch no pinned memory: only those that do call out (PinnedChanges says what changed).
    const bool pinned = event.info->kind == format::Kind::kPinnedHost ||
                        (outcome.has_previous && outcome.previous.kind == format::Kind::kPinnedHost);
    if (pinned && options_.pinned && !pinned_overflow_) LogPinned(event, outcome);
  }
  void KeepOom(const Event& event, uint64_t index);
  void SnapshotOom(OomRecord& record, uint64_t index);
  void LogPinned(const Event& event, const Outcome& outcome);

  Analysis& a_;
  const AnalyzeOptions& options_;
  MemoryModel model_;
  OwnerTracker owners_{a_.stacks, a_.symbols, a_.info.header.executable};
  DriverMemoryTracker driver_;
  PhaseTracker phases_{options_.phase_filter};
  EventStamp last_event_;  // the last event replayed while phases_ was not active
  // PyTorch's allocator, replayed on a thread of its own where the machine has a core to spare for it, else by the
  // reader's thread while it waits (two CPUs) or inline (LayerThreadMode).
  LayerThread layer_{LayerThreadMode(options_.layer_thread)};
  AutogradPasses autograd_;
  std::vector<ThreadScan> threads_;  // by thread index
  absl::flat_hash_map<uint32_t, ThreadScan> far_threads_;
  // Training and validation, looked for unless an earlier pass found them (then they are fed to phases_).
  bool detect_phases_;
  StepPhaseDetector step_phases_;
  // The tensors live on `device` now, as the autograd judgement takes them.
  std::vector<AutogradTensor> LiveAutogradTensors(int32_t device);
  std::vector<OomRecord> first_ooms_;
  std::deque<OomRecord> last_ooms_;
  // The last OOM snapshot: when, of what, and the live set's version then.
  bool have_last_snapshot_ = false;
  uint64_t last_snapshot_index_ = 0;
  uint64_t last_snapshot_version_ = 0;
  SnapshotFilter last_snapshot_scope_;
  GroupedSnapshot last_snapshot_;
  std::vector<PinnedChange> pinned_log_;
  absl::flat_hash_map<std::tuple<int32_t, format::Kind, uint64_t>, AllocationTotal> allocation_totals_;
  // Failed driver allocations PyTorch's allocator made, per device, waiting to learn whether it served the request
  // after all (a TORCH_ALLOC next) or raised (a TORCH_OOM next); and the seqs of those it recovered from.
  absl::flat_hash_map<int32_t, std::vector<uint64_t>> torch_failures_pending_;
  absl::flat_hash_set<uint64_t> torch_failures_recovered_;
  bool pinned_overflow_ = false;
  double read_fraction_ = -1;  // the share of the file read so far (OnReadProgress); negative until known
};

// Replays a trace again for the pinned host tracker alone (when its changes outgrew the log).
class PinnedPass : public TraceVisitor {
 public:
  PinnedPass(PinnedTracker& tracker, uint64_t event_limit) : tracker_(tracker), event_limit_(event_limit) {}
  void OnEvent(const Event& event) override;

 private:
  PinnedTracker& tracker_;
  uint64_t event_limit_;
  MemoryModel model_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_SCAN_PASS_H_
