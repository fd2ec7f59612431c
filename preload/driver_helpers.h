// The few driver functions the recorder itself calls (current device, free/total after a failed allocation, device
// names), resolved from the same libcuda that the program's own calls go to. They are called through these real
// pointers, so they are never recorded.
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

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_DRIVER_HELPERS_H_
