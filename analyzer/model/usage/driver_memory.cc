// DriverMemoryTracker (see driver_memory.h). Must never hold an evaluated sample: only the per-device aggregates.
#include "analyzer/model/usage/driver_memory.h"

#include <algorithm>
#include <limits>

namespace cumemtrace::analyzer {

void DriverMemoryTracker::Add(const MemorySample& sample, const OwnerTracker& live) {
  const uint64_t arrival = arrivals_++;
  // The replay is past this sample's moment already: what is live now is the nearest state left.
  if (any_event_ && sample.after_seq < last_seq_) {
    Take(sample, arrival, live.DeviceBytes(sample.device));
    return;
  }
  pending_.push(Pending{sample, arrival});
}

void DriverMemoryTracker::Evaluate(uint64_t seq, const OwnerTracker& live) {
  while (!pending_.empty() && pending_.top().sample.after_seq < seq) {
    const Pending p = pending_.top();
    pending_.pop();
    Take(p.sample, p.arrival, live.DeviceBytes(p.sample.device));
  }
}

void DriverMemoryTracker::Take(const MemorySample& sample, uint64_t arrival, uint64_t traced) {
  const uint64_t used = sample.free_bytes >= sample.total_bytes ? 0 : sample.total_bytes - sample.free_bytes;
  // In 128 bits and clamped: a damaged sample may claim more than 2^63 bytes.
  const __int128 difference = static_cast<__int128>(used) - static_cast<__int128>(traced);
  const int64_t unexplained = static_cast<int64_t>(
      std::clamp<__int128>(difference, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  auto [it, first] = devices_.try_emplace(sample.device);
  PerDevice& d = it->second;
  DriverMemory& r = d.result;
  r.device = sample.device;
  if (first || used > r.used_max) {
    r.used_max = used;
    r.traced_at_max = traced;
    r.unexplained_at_max = unexplained;
  }
  if (first) {
    r.used_min = used;
    r.unexplained_min = r.unexplained_max = unexplained;
  } else {
    r.used_min = std::min(r.used_min, used);
    r.unexplained_min = std::min(r.unexplained_min, unexplained);
    r.unexplained_max = std::max(r.unexplained_max, unexplained);
  }
  const bool later = first || sample.after_seq > d.last_after_seq ||
                     (sample.after_seq == d.last_after_seq && arrival > d.last_arrival);
  if (later) {
    r.total_bytes = sample.total_bytes;
    r.unexplained_last = unexplained;
    d.last_after_seq = sample.after_seq;
    d.last_arrival = arrival;
  }
  ++r.samples;
}

std::vector<DriverMemory> DriverMemoryTracker::Finish(const OwnerTracker& live) {
  while (!pending_.empty()) {
    const Pending p = pending_.top();
    pending_.pop();
    Take(p.sample, p.arrival, live.DeviceBytes(p.sample.device));
  }
  std::vector<DriverMemory> out;
  for (const auto& [device, d] : devices_) out.push_back(d.result);
  return out;
}

}  // namespace cumemtrace::analyzer
