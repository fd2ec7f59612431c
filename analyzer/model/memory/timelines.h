// Byte and count timelines per (device, series), where a series is a memory kind or the device total. Tracks the
// current value and the peak: its bytes, and the event (index in replay order, time, seq) that first reached it.
//
// It also keeps what an exact "live at the peak" snapshot needs in a single pass: each allocation that was live at
// its series' current peak and has been freed since (stack and size). A new peak empties that list, so it never
// holds more than the allocations live at the peak. At the end, live at the peak = still live and allocated at or
// before the peak, plus that list (stacks/grouped_snapshot.h: GroupAtPeaks).
//
// The device total sums the kinds that are device memory (device, managed, pool, vmm_physical). It must never add
// vmm_mapped (mappings of physical memory already counted as vmm_physical) or address_reserve (address space, not
// memory), and it must never add host memory (pinned_host, registered_host).
#ifndef CUMEMTRACE_ANALYZER_MODEL_MEMORY_TIMELINES_H_
#define CUMEMTRACE_ANALYZER_MODEL_MEMORY_TIMELINES_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analyzer/model/memory/live_set.h"
#include "proto/format.h"

namespace cumemtrace::analyzer {

// Series indices: static_cast<int>(format::Kind) for kinds 1..8, and kDeviceTotalSeries.
inline constexpr int kDeviceTotalSeries = format::kNumKinds;
inline constexpr int kNumSeries = format::kNumKinds + 1;

inline constexpr bool InDeviceTotal(format::Kind kind) {
  return kind == format::Kind::kDevice || kind == format::Kind::kManaged || kind == format::Kind::kPool ||
         kind == format::Kind::kVmmPhysical;
}
inline constexpr bool IsHostMemory(format::Kind kind) {
  return kind == format::Kind::kPinnedHost || kind == format::Kind::kRegisteredHost;
}
// Memory, as opposed to address space or a second view of memory already counted.
inline constexpr bool IsMemoryKind(format::Kind kind) { return InDeviceTotal(kind) || IsHostMemory(kind); }
// Address space (a reservation) or a second view of memory counted elsewhere (a mapping): listed in leaks, never
// the allocation a diagnosis names.
inline constexpr bool IsAddressSpaceOrView(format::Kind kind) {
  return kind == format::Kind::kAddressReserve || kind == format::Kind::kVmmMapped;
}

// "device", "pinned_host", ... and "total" for kDeviceTotalSeries.
const char* SeriesName(int series);

// Where in the replay something happened.
struct EventStamp {
  uint64_t index = 0;  // position in the replay (0 = first event delivered)
  int64_t time_ns = 0;
  uint64_t seq = 0;
};

struct Series {
  uint64_t bytes = 0;  // live now
  uint64_t count = 0;
  uint64_t peak_bytes = 0;
  uint64_t peak_count = 0;  // live allocations at the peak
  EventStamp peak;          // valid when peak_bytes > 0
  uint64_t allocations = 0;      // successful allocations so far
  uint64_t allocated_bytes = 0;  // their bytes, summed
};

struct FreedSincePeak {
  uint64_t stack = 0;
  uint64_t size = 0;
};

struct DeviceSeries {
  int32_t device = 0;
  std::array<Series, kNumSeries> series;
  std::array<std::vector<FreedSincePeak>, kNumSeries> freed_since_peak;
};

class Timelines {
 public:
  void Add(const Allocation& a, const EventStamp& when) {
    DeviceSeries& d = ForDevice(a.device);
    Bump(d, static_cast<int>(a.kind) % kNumSeries, a.size, when, peak_gate_open_);
    if (InDeviceTotal(a.kind)) Bump(d, kDeviceTotalSeries, a.size, when, peak_gate_open_);
  }
  void Remove(const Allocation& a) {
    DeviceSeries& d = ForDevice(a.device);
    Drop(d, static_cast<int>(a.kind) % kNumSeries, a);
    if (InDeviceTotal(a.kind)) Drop(d, kDeviceTotalSeries, a);
  }

  // nullptr if nothing happened on `device`.
  const Series* Find(int32_t device, int series) const;
  const DeviceSeries* FindDevice(int32_t device) const;
  // Every device seen, by ordinal.
  std::vector<const DeviceSeries*> Devices() const;
  // Peaks move only while the gate is open (a phase filter, phases.h; open by default). Opening it makes each
  // series' current value a peak candidate as of `last`, the last event applied before the phase began.
  void SetPeakGate(bool open, const EventStamp& last);

 private:
  static void Bump(DeviceSeries& d, int series, uint64_t size, const EventStamp& when, bool peaks) {
    Series& s = d.series[series];
    s.bytes += size;
    ++s.count;
    ++s.allocations;
    s.allocated_bytes += size;
    if (peaks && s.bytes > s.peak_bytes) {
      s.peak_bytes = s.bytes;
      s.peak_count = s.count;
      s.peak = when;
      d.freed_since_peak[series].clear();
    }
  }
  static void Drop(DeviceSeries& d, int series, const Allocation& a) {
    Series& s = d.series[series];
    s.bytes -= a.size;
    --s.count;
    // Live at the peak (allocated at or before it) and freed now, after it.
    if (s.peak_bytes != 0 && a.index <= s.peak.index) d.freed_since_peak[series].push_back({a.stack, a.size});
  }
  DeviceSeries& ForDevice(int32_t device) {
    if (cached_ != nullptr && cached_->device == device) return *cached_;
    return ForDeviceSlow(device);
  }
  DeviceSeries& ForDeviceSlow(int32_t device);

  std::vector<std::unique_ptr<DeviceSeries>> devices_;
  absl::flat_hash_map<int32_t, DeviceSeries*> by_device_;
  DeviceSeries* cached_ = nullptr;
  bool peak_gate_open_ = true;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_MEMORY_TIMELINES_H_
