#include "preload/driver_helpers.h"

#include <cuda.h>
#include <string.h>

#include <atomic>

#include "preload/symbol_resolver.h"

namespace cumemtrace::preload {
namespace {

struct Helpers {
  CUresult (*ctx_get_device)(CUdevice*);
  CUresult (*mem_get_info)(size_t*, size_t*);
  CUresult (*driver_get_version)(int*);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*device_get_name)(char*, int, CUdevice);
  CUresult (*device_total_mem)(size_t*, CUdevice);
  CUresult (*device_get_uuid)(CUuuid*, CUdevice);
};

Helpers g_helpers;
std::atomic<int> g_state{0};  // 0 = unknown, 1 = resolving, 2 = ready

template <typename Fn>
void Resolve(const void* beside, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(ResolveBeside(beside, name));
}

bool Ready() { return g_state.load(std::memory_order_acquire) == 2; }

}  // namespace

void LearnDriverFrom(const void* real_driver_function) {
  if (real_driver_function == nullptr || g_state.load(std::memory_order_acquire) != 0) return;
  int expected = 0;
  if (!g_state.compare_exchange_strong(expected, 1)) return;
  Resolve(real_driver_function, "cuCtxGetDevice", &g_helpers.ctx_get_device);
  Resolve(real_driver_function, "cuMemGetInfo_v2", &g_helpers.mem_get_info);
  Resolve(real_driver_function, "cuDriverGetVersion", &g_helpers.driver_get_version);
  Resolve(real_driver_function, "cuDeviceGet", &g_helpers.device_get);
  Resolve(real_driver_function, "cuDeviceGetName", &g_helpers.device_get_name);
  Resolve(real_driver_function, "cuDeviceTotalMem_v2", &g_helpers.device_total_mem);
  Resolve(real_driver_function, "cuDeviceGetUuid_v2", &g_helpers.device_get_uuid);
  if (g_helpers.device_get_uuid == nullptr) Resolve(real_driver_function, "cuDeviceGetUuid", &g_helpers.device_get_uuid);
  g_state.store(2, std::memory_order_release);
}

bool CurrentDevice(int32_t* device) {
  CUdevice d = 0;
  if (!Ready() || g_helpers.ctx_get_device == nullptr || g_helpers.ctx_get_device(&d) != CUDA_SUCCESS) return false;
  *device = d;
  return true;
}

bool DriverMemInfo(uint64_t* free_bytes, uint64_t* total_bytes) {
  size_t f = 0, t = 0;
  if (!Ready() || g_helpers.mem_get_info == nullptr || g_helpers.mem_get_info(&f, &t) != CUDA_SUCCESS) return false;
  *free_bytes = f;
  *total_bytes = t;
  return true;
}

bool DriverVersion(int32_t* version) {
  int v = 0;
  if (!Ready() || g_helpers.driver_get_version == nullptr || g_helpers.driver_get_version(&v) != CUDA_SUCCESS) {
    return false;
  }
  *version = v;
  return true;
}

bool DescribeDevice(int32_t ordinal, DeviceDescription* out) {
  memset(out, 0, sizeof(*out));
  CUdevice dev = 0;
  if (!Ready() || g_helpers.device_get == nullptr || g_helpers.device_get(&dev, ordinal) != CUDA_SUCCESS) {
    return false;
  }
  if (g_helpers.device_get_name != nullptr) g_helpers.device_get_name(out->name, sizeof(out->name) - 1, dev);
  size_t total = 0;
  if (g_helpers.device_total_mem != nullptr && g_helpers.device_total_mem(&total, dev) == CUDA_SUCCESS) {
    out->total_memory = total;
  }
  CUuuid uuid;
  if (g_helpers.device_get_uuid != nullptr && g_helpers.device_get_uuid(&uuid, dev) == CUDA_SUCCESS) {
    memcpy(out->uuid, uuid.bytes, sizeof(out->uuid));
    out->has_uuid = true;
  }
  return true;
}


void MemorySampler::Reset(int64_t interval_ns) {
  interval_ns_ = interval_ns;
  for (int64_t& last : last_ns_) __atomic_store_n(&last, 0, __ATOMIC_RELAXED);
}

bool MemorySampler::SampleIfDue(int32_t device, bool current, int64_t now_ns, uint64_t* free_bytes,
                                uint64_t* total_bytes) {
  if (interval_ns_ <= 0 || device < 0 || device >= kMaxDevices) return false;
  int64_t* slot = &last_ns_[device];
  int64_t last = __atomic_load_n(slot, __ATOMIC_RELAXED);
  if (last != 0 && now_ns - last < interval_ns_) return false;
  if (!current) {
    int32_t current_device = -1;
    if (!CurrentDevice(&current_device) || current_device != device) return false;
  }
  int64_t claimed = now_ns != 0 ? now_ns : 1;
  if (!__atomic_compare_exchange_n(slot, &last, claimed, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return false;
  return DriverMemInfo(free_bytes, total_bytes);
}

}  // namespace cumemtrace::preload
