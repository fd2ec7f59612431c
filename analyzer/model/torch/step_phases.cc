// StepPhaseDetector (see step_phases.h).
#include "analyzer/model/torch/step_phases.h"

#include <algorithm>

namespace cumemtrace::analyzer {

void StepPhaseDetector::OnProgramAlloc(uint64_t seq, int64_t time_ns, uint32_t thread, uint64_t stack,
                                       uint32_t epoch) {
  if (open_ && epoch != current_.epoch) CloseCandidate();
  if (allocs_per_epoch_.size() <= epoch) allocs_per_epoch_.resize(size_t{epoch} + 1, 0);
  ++allocs_per_epoch_[epoch];
  StackUse& use = uses_[stack];
  // Epochs before this one that used the call path: a validation loop's many batches in one epoch stay rare.
  const uint32_t before = use.epochs - (use.epochs > 0 && use.last_epoch == epoch ? 1 : 0);
  const bool rare = epoch >= kMinPasses && uint64_t{before} * kRareShare < epoch;
  if (use.epochs == 0 || use.last_epoch != epoch) {
    ++use.epochs;
    use.last_epoch = epoch;
  }
  if (!rare) {
    if (open_ && current_.next_seq == 0) {
      current_.next_seq = seq;
      current_.next_ns = time_ns;
    }
    return;
  }
  if (!open_) {
    open_ = true;
    current_ = Candidate{};
    current_.epoch = epoch;
    current_.thread = thread;
    current_.first_seq = seq;
    current_.first_ns = time_ns;
  }
  current_.last_seq = seq;
  current_.last_ns = time_ns;
  current_.next_seq = 0;
  ++current_.rare_allocs;
}

void StepPhaseDetector::CloseCandidate() {
  open_ = false;
  if (current_.rare_allocs >= kMinAllocs && candidates_.size() < kMaxCandidates) candidates_.push_back(current_);
}

std::vector<PhaseInfo> StepPhaseDetector::Finish(uint32_t passes, uint64_t last_seq, int64_t start_ns,
                                                 int64_t end_ns) {
  if (open_) CloseCandidate();
  std::vector<PhaseInfo> out;
  if (candidates_.empty() || allocs_per_epoch_.empty()) return out;
  std::vector<uint32_t> counts = allocs_per_epoch_;
  std::nth_element(counts.begin(), counts.begin() + counts.size() / 2, counts.end());
  const uint64_t median = counts[counts.size() / 2];

  auto transition = [&](format::PhaseKind kind, const char* name, uint64_t after_seq, int64_t time_ns,
                        uint32_t thread) {
    PhaseInfo p;
    p.kind = kind;
    if (kind == format::PhaseKind::kPush) p.name = name;
    p.after_seq = after_seq;
    p.time_ns = time_ns;
    p.thread = thread;
    p.domain = kDetectedPhaseDomain;
    out.push_back(std::move(p));
  };
  // Training resumes where the last validation's program went on (at first: the start of the trace).
  uint64_t train_after_seq = 0;
  int64_t train_ns = start_ns;
  uint32_t train_epoch = 0;
  uint32_t thread = 0;
  bool any = false;
  for (const Candidate& c : candidates_) {
    if (c.rare_allocs * 2 < median) continue;  // less than about one forward pass: an occasional step of training
    if (!any) thread = c.thread;
    any = true;
    if (c.epoch > train_epoch) {  // a backward pass began since the last validation
      transition(format::PhaseKind::kPush, kTrainPhase, train_after_seq, train_ns, thread);
      transition(format::PhaseKind::kPop, nullptr, c.first_seq - 1, c.first_ns, thread);
    }
    transition(format::PhaseKind::kPush, kValidatePhase, c.first_seq - 1, c.first_ns, thread);
    transition(format::PhaseKind::kPop, nullptr, c.last_seq, c.last_ns, thread);
    train_after_seq = c.next_seq != 0 ? c.next_seq - 1 : c.last_seq;
    train_ns = c.next_seq != 0 ? c.next_ns : c.last_ns;
    train_epoch = c.epoch;
  }
  if (!any) return out;
  if (passes > train_epoch) {  // training resumed after the last validation
    transition(format::PhaseKind::kPush, kTrainPhase, train_after_seq, train_ns, thread);
    transition(format::PhaseKind::kPop, nullptr, last_seq, end_ns, thread);
  }
  return out;
}

}  // namespace cumemtrace::analyzer
