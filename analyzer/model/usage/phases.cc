// PhaseTracker (see phases.h): NVTX ranges placed among the events, per-phase peaks, and the phase filter's gate.
#include "analyzer/model/usage/phases.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "analyzer/model/trace_info.h"

namespace cumemtrace::analyzer {
namespace {

constexpr uint64_t kOpenEnd = std::numeric_limits<uint64_t>::max();

}  // namespace

const char* PhaseSeriesName(int series) {
  switch (series) {
    case kTorchReservedSeries: return "torch_reserved";
    case kTorchAllocatedSeries: return "torch_allocated";
    case kTorchRequestedSeries: return "torch_requested";
    default: return SeriesName(series);
  }
}

std::string PhaseFilter::Label() const {
  if (!phase.empty()) return phase;
  if (has_window) return absl::StrCat("window ", window_start_ms, ":", window_end_ms, " ms");
  return "";
}

void PhaseTracker::Add(const PhaseInfo& phase) {
  seen_any_ = true;
  auto at = std::upper_bound(queue_.begin(), queue_.end(), phase.after_seq,
                             [](uint64_t seq, const PhaseInfo& p) { return seq < p.after_seq; });
  queue_.insert(at, phase);
}

void PhaseTracker::Before(const Event& event, uint64_t index, int64_t start_ns, Timelines& timelines) {
  while (!queue_.empty() && queue_.front().after_seq < event.seq) {
    Apply(queue_.front(), index, timelines);
    queue_.pop_front();
  }
  if (!filter_.active()) return;
  bool inside;
  if (filter_.has_window) {
    const int64_t ms = SaturatingSub(event.time_ns, start_ns) / 1000000;
    inside = ms >= filter_.window_start_ms && ms < filter_.window_end_ms;
  } else {
    auto it = open_names_.find(filter_.phase);
    inside = it != open_names_.end() && it->second > 0;
  }
  if (!gate_started_) {  // peaks move only inside the filter
    gate_started_ = true;
    timelines.SetPeakGate(false, last_);
  }
  if (inside != gate_open_) SetGate(inside, index, timelines);
}

void PhaseTracker::SetGate(bool open, uint64_t index, Timelines& timelines) {
  gate_open_ = open;
  if (open) {
    gate_spans_.emplace_back(index, kOpenEnd);
  } else if (!gate_spans_.empty() && gate_spans_.back().second == kOpenEnd) {
    gate_spans_.back().second = index;
  }
  timelines.SetPeakGate(open, last_);
}

void PhaseTracker::After(const Event& event, uint64_t index, const Timelines& timelines) {
  last_ = EventStamp{index, event.time_ns, event.seq};
  if (gate_open_) ++filter_events_;
  // PyTorch's own series move in Torch(), after the allocator layer applied the event.
  if (event.result != 0 || event.info->op != format::Op::kAlloc || format::IsTorchApi(event.api)) return;
  for (size_t i : open_summaries_) {
    PhaseSummary& s = summaries_[i];
    const int kind = static_cast<int>(event.info->kind) % kNumSeries;
    if (const Series* series = timelines.Find(event.device, kind); series != nullptr) {
      Raise(s, event.device, kind, series->bytes, last_);
    }
    if (InDeviceTotal(event.info->kind)) {
      if (const Series* total = timelines.Find(event.device, kDeviceTotalSeries); total != nullptr) {
        Raise(s, event.device, kDeviceTotalSeries, total->bytes, last_);
      }
    }
  }
}

void PhaseTracker::Torch(int32_t device, const TorchBytes& now, bool grew) {
  torch_[device] = now;
  if (!grew) return;
  for (size_t i : open_summaries_) RaiseTorch(summaries_[i], device, now);
}

void PhaseTracker::CatchUp(const EventStamp& last, const std::vector<std::pair<int32_t, TorchBytes>>& devices) {
  last_ = last;
  for (const auto& [device, bytes] : devices) torch_[device] = bytes;
}

void PhaseTracker::RaiseTorch(PhaseSummary& s, int32_t device, const TorchBytes& now) {
  if (now.reserved > 0) Raise(s, device, kTorchReservedSeries, now.reserved, last_);
  if (now.allocated > 0) Raise(s, device, kTorchAllocatedSeries, now.allocated, last_);
  if (now.requested > 0) Raise(s, device, kTorchRequestedSeries, now.requested, last_);
}

void PhaseTracker::Raise(PhaseSummary& s, int32_t device, int series, uint64_t bytes, const EventStamp& at) {
  for (PhasePeak& p : s.peaks) {
    if (p.device == device && p.series == series) {
      if (bytes > p.peak_bytes) {
        p.peak_bytes = bytes;
        p.at = at;
      }
      return;
    }
  }
  s.peaks.push_back(PhasePeak{device, series, bytes, at});
}

void PhaseTracker::NameOpened(const std::string& name, int64_t time_ns, uint64_t /*index*/,
                              const Timelines& timelines) {
  auto [it, inserted] = summary_of_.try_emplace(name, summaries_.size());
  if (inserted) {
    summaries_.emplace_back();
    summaries_.back().name = name;
    summaries_.back().first_ns = time_ns;
  }
  PhaseSummary& s = summaries_[it->second];
  ++s.occurrences;
  if (open_names_[name]++ != 0) return;
  open_summaries_.push_back(it->second);
  // What was live when it opened counts: the phase's peak is at least that.
  for (const DeviceSeries* d : timelines.Devices()) {
    for (int series = 1; series < kNumSeries; ++series) {
      if (series == static_cast<int>(format::Kind::kTorchBlock)) continue;  // tensors: PyTorch's own layer
      if (d->series[series].bytes > 0) Raise(s, d->device, series, d->series[series].bytes, last_);
    }
  }
  for (const auto& [device, bytes] : torch_) RaiseTorch(s, device, bytes);
}

void PhaseTracker::OpenRange(const PhaseInfo& phase, std::vector<Open>* stack, uint64_t index,
                             const Timelines& timelines) {
  Open open;
  open.name = phase.name.empty() ? "(unnamed)" : phase.name;
  open.path = stack != nullptr && !stack->empty() ? absl::StrCat(stack->back().path, "/", open.name) : open.name;
  open.begin_ns = phase.time_ns;
  open.order = ++order_;
  open.thread = phase.thread;
  open.range = std::numeric_limits<size_t>::max();
  if (ranges_.size() < kMaxRanges) {
    open.range = ranges_.size();
    PhaseRange r;
    r.name = open.name;
    r.path = open.path;
    r.thread = phase.thread;
    r.domain = phase.domain;
    r.begin_ns = phase.time_ns;
    r.begin_seq = phase.after_seq;
    r.stacked = stack != nullptr;
    ranges_.push_back(std::move(r));
  } else {
    ++ranges_dropped_;
  }
  NameOpened(open.name, phase.time_ns, index, timelines);
  if (stack != nullptr) {
    stack->push_back(std::move(open));
  } else {
    started_[phase.range_id] = std::move(open);
  }
}

void PhaseTracker::CloseRange(Open open, int64_t end_ns, uint64_t end_seq, uint64_t /*index*/,
                              Timelines& /*timelines*/) {
  if (open.range < ranges_.size()) {
    PhaseRange& r = ranges_[open.range];
    r.end_ns = end_ns;
    r.end_seq = end_seq;
    r.closed = !closing_at_end_;
  }
  PhaseSummary& s = summaries_[summary_of_[open.name]];
  // Saturating: a damaged clock can put a range's ends at opposite ends of int64.
  s.total_ns = SaturatingAdd(s.total_ns, SaturatingSub(end_ns, open.begin_ns));
  if (--open_names_[open.name] == 0) {
    const size_t i = summary_of_[open.name];
    open_summaries_.erase(std::find(open_summaries_.begin(), open_summaries_.end(), i));
  }
}

void PhaseTracker::Apply(const PhaseInfo& phase, uint64_t index, Timelines& timelines) {
  switch (phase.kind) {
    case format::PhaseKind::kPush:
      OpenRange(phase, &stacks_[{phase.thread, phase.domain}], index, timelines);
      break;
    case format::PhaseKind::kPop: {
      auto it = stacks_.find({phase.thread, phase.domain});
      if (it == stacks_.end() || it->second.empty()) {
        ++unmatched_;
        break;
      }
      Open open = std::move(it->second.back());
      it->second.pop_back();
      CloseRange(std::move(open), phase.time_ns, phase.after_seq, index, timelines);
      break;
    }
    case format::PhaseKind::kStart:
      OpenRange(phase, nullptr, index, timelines);
      break;
    case format::PhaseKind::kEnd: {
      auto it = started_.find(phase.range_id);
      if (it == started_.end()) {
        ++unmatched_;
        break;
      }
      Open open = std::move(it->second);
      started_.erase(it);
      CloseRange(std::move(open), phase.time_ns, phase.after_seq, index, timelines);
      break;
    }
    case format::PhaseKind::kMark:
      ++marks_;
      break;
    case format::PhaseKind::kUnknown:
      break;
  }
  NoteCurrentChanged(index);
}

std::string PhaseTracker::MostRecentPath() const {
  const Open* best = nullptr;
  for (const auto& [key, stack] : stacks_) {
    if (!stack.empty() && (best == nullptr || stack.back().order > best->order)) best = &stack.back();
  }
  for (const auto& [id, open] : started_) {
    if (best == nullptr || open.order > best->order) best = &open;
  }
  return best == nullptr ? "" : best->path;
}

std::string PhaseTracker::CurrentPhase(uint32_t thread) const {
  const Open* best = nullptr;
  for (const auto& [key, stack] : stacks_) {
    if (key.first == thread && !stack.empty() && (best == nullptr || stack.back().order > best->order)) {
      best = &stack.back();
    }
  }
  return best != nullptr ? best->path : MostRecentPath();
}

void PhaseTracker::NoteCurrentChanged(uint64_t index) {
  std::string path = MostRecentPath();
  if (!current_.empty() && current_.back().second == path) return;
  if (!current_.empty() && current_.back().first == index) {
    current_.back().second = std::move(path);
  } else {
    current_.emplace_back(index, std::move(path));
  }
}

std::string PhaseTracker::PhaseAt(uint64_t index) const {
  auto it = std::upper_bound(current_.begin(), current_.end(), index,
                             [](uint64_t i, const std::pair<uint64_t, std::string>& c) { return i < c.first; });
  return it == current_.begin() ? "" : std::prev(it)->second;
}

bool PhaseTracker::Inside(uint64_t index) const {
  if (!filter_.active()) return true;
  auto it = std::upper_bound(gate_spans_.begin(), gate_spans_.end(), index,
                             [](uint64_t i, const std::pair<uint64_t, uint64_t>& s) { return i < s.first; });
  return it != gate_spans_.begin() && index < std::prev(it)->second;
}

PhaseResults PhaseTracker::Finish(int64_t end_ns, uint64_t next_index, Timelines& timelines) {
  const uint64_t last_seq = last_.seq;
  while (!queue_.empty()) {
    Apply(queue_.front(), next_index, timelines);
    queue_.pop_front();
  }
  closing_at_end_ = true;
  for (auto& [key, stack] : stacks_) {
    while (!stack.empty()) {
      Open open = std::move(stack.back());
      stack.pop_back();
      CloseRange(std::move(open), end_ns, last_seq, next_index, timelines);
    }
  }
  for (auto& [id, open] : started_) CloseRange(std::move(open), end_ns, last_seq, next_index, timelines);
  started_.clear();
  if (gate_open_ && !gate_spans_.empty()) gate_spans_.back().second = next_index;
  PhaseResults out;
  out.phases = summaries_;
  for (PhaseSummary& s : out.phases) {
    std::sort(s.peaks.begin(), s.peaks.end(), [](const PhasePeak& a, const PhasePeak& b) {
      return a.device != b.device ? a.device < b.device : a.series < b.series;
    });
  }
  out.ranges = ranges_;
  out.ranges_dropped = ranges_dropped_;
  out.marks = marks_;
  out.detected = detected_;
  out.unmatched_closes = unmatched_;
  out.filter_active = filter_.active();
  out.filter_label = filter_.Label();
  out.filter_events = filter_events_;
  return out;
}

}  // namespace cumemtrace::analyzer
