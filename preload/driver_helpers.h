// The few driver functions the recorder itself calls (current device, free/total after a failed allocation and for
// memory samples, device names), resolved from the same libcuda that the program's own calls go to. They are called
// through these real pointers, so they are never recorded.
#ifndef CUMEMTRACE_PRELOAD_DRIVER_HELPERS_H_
#define CUMEMTRACE_PRELOAD_DRIVER_HELPERS_H_

#include <stddef.h>
#include <stdint.h>

namespace cumemtrace::preload {

// Learns where libcuda is from any real driver function pointer; the first call wins.
void LearnDriverFrom(const void* real_driver_function);

// Each returns false if the driver is not known yet or the call failed.
bool CurrentDevice(int32_t* device);
bool DriverMemInfo(uint64_t* free_bytes, uint64_t* total_bytes);
bool DriverVersion(int32_t* version);

struct DeviceDescription {
  char name[256];
  uint8_t uuid[16];
  bool has_uuid;
  uint64_t total_memory;
};
bool DescribeDevice(int32_t ordinal, DeviceDescription* out);

// Memory samples (CUMEMTRACE_SAMPLE_MS): the driver's free/total of one device, taken on a thread that allocates on
// it, at most once per interval per device and always at the first allocation seen on each device. The check is
// one relaxed load per event; a thread that finds a sample due claims it with a compare-and-swap, so two threads
// never sample one device for the same interval. cuMemGetInfo answers for the calling thread's current device, so
// a sample is only taken when that is the event's device.
class MemorySampler {
 public:
  static constexpr int kMaxDevices = 64;

  // `interval_ns` 0 turns sampling off. Forgets every device's last sample (a forked child's new trace).
  void Reset(int64_t interval_ns);

  // For an allocation on `device` at `now_ns`: true (with free/total) if a sample was due and taken. `current`:
  // the event's device is known to be the thread's current device (else the driver is asked).
  bool SampleIfDue(int32_t device, bool current, int64_t now_ns, uint64_t* free_bytes, uint64_t* total_bytes);

 private:
  int64_t interval_ns_ = 0;
  int64_t last_ns_[kMaxDevices] = {};  // 0 = never sampled; accessed with __atomic builtins
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_DRIVER_HELPERS_H_
