// StepPhaseDetector (see step_phases.h).
#include "analyzer/model/torch/step_phases.h"

#include <algorithm>

namespace cumemtrace::analyzer {

void StepPhaseDetector::OnProgramRequest(uint64_t seq, uint64_t request_after_seq, int64_t time_ns, uint32_t thread,
                                         uint64_t stack, uint32_t epoch, bool failed) {
  if (open_ && epoch != current_.epoch) CloseCandidate(false);
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
    if (open_ && !current_.has_next) {
      current_.has_next = true;
      current_.next_after = std::max(request_after_seq, current_.last_seq);
      current_.next_ns = time_ns;
    }
    return;
  }
  if (!open_) {
    open_ = true;
    current_ = Candidate{};
    current_.epoch = epoch;
    current_.thread = thread;
    current_.first_after = std::min(request_after_seq, seq > 0 ? seq - 1 : 0);
    current_.first_ns = time_ns;
  }
  current_.last_seq = std::max(seq, current_.last_seq);
  current_.last_ns = time_ns;
  current_.has_next = false;
  current_.failed = current_.failed || failed;
  ++current_.rare;
}

void StepPhaseDetector::CloseCandidate(bool at_end) {
  open_ = false;
  const bool kept = current_.rare >= kMinAllocs || (at_end && current_.failed && current_.rare >= kMinFailedAllocs);
  if (kept && candidates_.size() < kMaxCandidates) candidates_.push_back(current_);
}

std::vector<PhaseInfo> StepPhaseDetector::Finish(uint32_t passes, int64_t start_ns) {
  if (open_) CloseCandidate(true);
  std::vector<PhaseInfo> out;
  if (candidates_.empty() || allocs_per_epoch_.empty()) return out;
  std::vector<uint32_t> counts = allocs_per_epoch_;
  std::nth_element(counts.begin(), counts.begin() + counts.size() / 2, counts.end());
  const uint64_t median = counts[counts.size() / 2];

  uint64_t last_after = 0;  // transitions never go back (a damaged trace's sequence numbers may)
  auto transition = [&](format::PhaseKind kind, const char* name, uint64_t after_seq, int64_t time_ns,
                        uint32_t thread) {
    PhaseInfo p;
    p.kind = kind;
    if (kind == format::PhaseKind::kPush) p.name = name;
    last_after = std::max(last_after, after_seq);
    p.after_seq = last_after;
    p.time_ns = time_ns;
    p.thread = thread;
    p.domain = kDetectedPhaseDomain;
    out.push_back(std::move(p));
  };
  // Training resumes where the last validation's program went on (at first: the start of the trace).
  uint64_t train_after = 0;
  int64_t train_ns = start_ns;
  uint32_t train_epoch = 0;
  uint32_t thread = 0;
  bool any = false;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const Candidate& c = candidates_[i];
    const bool last_and_failed = i + 1 == candidates_.size() && c.failed;
    // Less than about one forward pass: an occasional step of training (unless the run died in it).
    if (c.rare * 2 < median && !last_and_failed) continue;
    if (!any) thread = c.thread;
    any = true;
    if (c.epoch > train_epoch) {  // a backward pass began since the last validation
      transition(format::PhaseKind::kPush, kTrainPhase, train_after, train_ns, thread);
      transition(format::PhaseKind::kPop, nullptr, c.first_after, c.first_ns, thread);
    }
    transition(format::PhaseKind::kPush, kValidatePhase, c.first_after, c.first_ns, thread);
    transition(format::PhaseKind::kPop, nullptr, c.last_seq, c.last_ns, thread);
    train_after = c.has_next ? c.next_after : c.last_seq;
    train_ns = c.has_next ? c.next_ns : c.last_ns;
    train_epoch = c.epoch;
  }
  if (!any) return out;
  // Training resumed after the last validation: its range ends with the trace (the tracker closes it there).
  if (passes > train_epoch) transition(format::PhaseKind::kPush, kTrainPhase, train_after, train_ns, thread);
  return out;
}

}  // namespace cumemtrace::analyzer
