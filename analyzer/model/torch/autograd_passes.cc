#include "analyzer/model/torch/autograd_passes.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"

namespace cumemtrace::analyzer {
namespace {

// A stack's live tensors, summed.
struct StackSum {
  uint64_t bytes = 0;
  uint64_t count = 0;
  uint32_t first_epoch = UINT32_MAX;
  uint32_t last_epoch = 0;
  absl::flat_hash_set<uint32_t> epochs;
  void Add(const AutogradTensor& t) {
    bytes += t.size;
    ++count;
    first_epoch = std::min(first_epoch, t.stamp.epoch);
    last_epoch = std::max(last_epoch, t.stamp.epoch);
    epochs.insert(t.stamp.epoch);
  }
};

std::vector<RetentionStack> Largest(const absl::flat_hash_map<uint64_t, StackSum>& sums, size_t max) {
  std::vector<RetentionStack> out;
  out.reserve(sums.size());
  for (const auto& [stack, s] : sums) {
    out.push_back({stack, s.bytes, s.count, s.first_epoch, s.last_epoch, static_cast<uint32_t>(s.epochs.size())});
  }
  std::sort(out.begin(), out.end(), [](const RetentionStack& a, const RetentionStack& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.stack < b.stack;
  });
  if (out.size() > max) out.resize(max);
  return out;
}

}  // namespace

bool IsAutogradEngineThread(absl::string_view thread_name) {
  return absl::StartsWith(thread_name, "pt_autograd_");
}

AutogradStamp AutogradPasses::OnBlockAlloc(format::Api api, bool engine_thread, uint32_t thread, uint64_t stack) {
  AutogradStamp stamp;
  stamp.grad = format::GradModeOf(api);
  if (stamp.grad != format::GradMode::kUnknown) grad_known_ = true;
  if (engine_thread) {
    if (!in_backward_) {
      ++passes_;
      pass_driver_ = last_program_thread_;
    }
    in_backward_ = true;
  } else {
    // The thread that started the pass allocates again (the optimizer, the next forward): the pass is over.
    if (thread == pass_driver_) in_backward_ = false;
    last_program_thread_ = thread;
  }
  stamp.backward = engine_thread;
  stamp.epoch = passes_;
  if (!engine_thread && stamp.grad == format::GradMode::kRecording) first_recording_epoch_.try_emplace(stack, passes_);
  return stamp;
}

GraphRetention AutogradPasses::JudgeRetention(const std::vector<AutogradTensor>& live, uint32_t passes_then) const {
  GraphRetention r;
  r.grad_known = grad_known_;
  r.backward_passes = passes_then;
  absl::flat_hash_map<uint64_t, StackSum> unfollowed, survivors, backward;
  for (const AutogradTensor& t : live) {
    r.live_bytes += t.size;
    if (t.stamp.backward) {
      r.backward_bytes += t.size;
      backward[t.stack].Add(t);
      continue;
    }
    if (t.stamp.grad != format::GradMode::kRecording) continue;
    r.recording_bytes += t.size;
    if (t.stamp.epoch >= passes_then) {
      auto first = first_recording_epoch_.find(t.stack);
      if (first != first_recording_epoch_.end() && first->second == passes_) unfollowed[t.stack].Add(t);
    } else {
      survivors[t.stack].Add(t);
    }
  }
  for (const auto& [stack, s] : unfollowed) {
    r.unfollowed_bytes += s.bytes;
    r.unfollowed_count += s.count;
  }
  r.unfollowed = Largest(unfollowed, GraphRetention::kMaxStacks);
  // Growth across steps: live tensors of one stack from at least three passes apart.
  absl::flat_hash_map<uint64_t, StackSum> kept;
  for (const auto& [stack, s] : survivors) {
    if (s.epochs.size() < 3) continue;
    kept[stack] = s;
    r.kept_bytes += s.bytes;
    r.kept_count += s.count;
  }
  r.kept = Largest(kept, GraphRetention::kMaxStacks);
  r.backward = Largest(backward, SIZE_MAX);
  r.first_recording_epochs.assign(first_recording_epoch_.begin(), first_recording_epoch_.end());
  return r;
}

}  // namespace cumemtrace::analyzer
