// Timelines' lookups by device (the hot updates are inline in timelines.h).
#include "analyzer/model/memory/timelines.h"

#include <algorithm>

namespace cumemtrace::analyzer {

const char* SeriesName(int series) {
  if (series == kDeviceTotalSeries) return "total";
  return format::KindName(static_cast<format::Kind>(series));
}

DeviceSeries& Timelines::ForDeviceSlow(int32_t device) {
  auto [it, inserted] = by_device_.try_emplace(device, nullptr);
  if (inserted) {
    devices_.push_back(std::make_unique<DeviceSeries>());
    devices_.back()->device = device;
    it->second = devices_.back().get();
  }
  cached_ = it->second;
  return *cached_;
}

const Series* Timelines::Find(int32_t device, int series) const {
  if (series < 0 || series >= kNumSeries) return nullptr;
  auto it = by_device_.find(device);
  return it == by_device_.end() ? nullptr : &it->second->series[series];
}

const DeviceSeries* Timelines::FindDevice(int32_t device) const {
  auto it = by_device_.find(device);
  return it == by_device_.end() ? nullptr : it->second;
}

void Timelines::SetPeakGate(bool open, const EventStamp& last) {
  peak_gate_open_ = open;
  if (!open) return;
  for (const auto& d : devices_) {
    for (int i = 0; i < kNumSeries; ++i) {
      Series& s = d->series[i];
      if (s.bytes <= s.peak_bytes) continue;
      s.peak_bytes = s.bytes;
      s.peak_count = s.count;
      s.peak = last;
      d->freed_since_peak[i].clear();
    }
  }
}

std::vector<const DeviceSeries*> Timelines::Devices() const {
  std::vector<const DeviceSeries*> out;
  for (const auto& d : devices_) out.push_back(d.get());
  std::sort(out.begin(), out.end(), [](const DeviceSeries* a, const DeviceSeries* b) { return a->device < b->device; });
  return out;
}

}  // namespace cumemtrace::analyzer
