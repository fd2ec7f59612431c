#include "preload/gpu_processes.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

namespace cumemtrace::preload {
namespace {

// NVML's C interface, the few calls used; declared here so that building needs no nvml.h (it is not part of every
// CUDA toolkit install). Layouts as nvml.h has had them since API 11 (CUDA 11).
using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlInsufficientSize = 7;
constexpr unsigned long long kNvmlValueNotAvailable = ~0ull;
// nvmlProcessInfo_t (API 12, for _v3) and nvmlProcessInfo_v2_t (for _v2): the same four fields.
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(sizeof(NvmlProcessInfo) == 24, "nvmlProcessInfo_t is 24 bytes");

struct Nvml {
  NvmlReturn (*init)();
  NvmlReturn (*handle_by_uuid)(const char* uuid, NvmlDevice* device);
  NvmlReturn (*compute_processes)(NvmlDevice device, unsigned int* count, NvmlProcessInfo* infos);
  const char* (*error_string)(NvmlReturn result);
  char unavailable[96];  // why NVML cannot be used ("" when it can)
};

pthread_mutex_t g_nvml_lock = PTHREAD_MUTEX_INITIALIZER;
bool g_nvml_tried = false;
Nvml g_nvml;

constexpr int kMaxDevices = 64;
uint8_t g_uuid[kMaxDevices][16];
bool g_has_uuid[kMaxDevices];  // written once per device, before any list of it is wanted
int64_t g_interval_ns = 0;
int64_t g_last_sample_ns[kMaxDevices];   // __atomic
int64_t g_last_failure_ns[kMaxDevices];  // __atomic
constexpr int64_t kFailureSpacingNs = 1000000000;

// Opens NVML once; afterwards g_nvml says whether it can be used. Called with g_nvml_lock held.
void OpenNvmlLocked() {
  if (g_nvml_tried) return;
  g_nvml_tried = true;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    snprintf(g_nvml.unavailable, sizeof(g_nvml.unavailable), "libnvidia-ml.so.1 could not be loaded");
    return;
  }
  g_nvml.init = reinterpret_cast<NvmlReturn (*)()>(dlsym(lib, "nvmlInit_v2"));
  g_nvml.handle_by_uuid =
      reinterpret_cast<NvmlReturn (*)(const char*, NvmlDevice*)>(dlsym(lib, "nvmlDeviceGetHandleByUUID"));
  using ProcessesFn = NvmlReturn (*)(NvmlDevice, unsigned int*, NvmlProcessInfo*);
  g_nvml.compute_processes = reinterpret_cast<ProcessesFn>(dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
  if (g_nvml.compute_processes == nullptr) {
    g_nvml.compute_processes = reinterpret_cast<ProcessesFn>(dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v2"));
  }
  g_nvml.error_string = reinterpret_cast<const char* (*)(NvmlReturn)>(dlsym(lib, "nvmlErrorString"));
  if (g_nvml.init == nullptr || g_nvml.handle_by_uuid == nullptr || g_nvml.compute_processes == nullptr) {
    snprintf(g_nvml.unavailable, sizeof(g_nvml.unavailable), "libnvidia-ml.so.1 lacks the calls used (too old)");
    return;
  }
  NvmlReturn r = g_nvml.init();
  if (r != kNvmlSuccess) {
    snprintf(g_nvml.unavailable, sizeof(g_nvml.unavailable), "nvmlInit failed: %s",
             g_nvml.error_string != nullptr ? g_nvml.error_string(r) : "unknown error");
  }
}

void SetError(GpuProcessesRecord* out, const char* what, NvmlReturn r) {
  snprintf(out->error, sizeof(out->error), "%s: %s", what,
           g_nvml.error_string != nullptr ? g_nvml.error_string(r) : "unknown error");
}

// /proc/PID/cmdline with its NULs as spaces, cut to fit; "" when unreadable (the process ended, no permission).
void ReadCommand(uint32_t pid, char* out, size_t size) {
  out[0] = '\0';
  char path[32];
  snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, size - 1);
  close(fd);
  if (n <= 0) {
    out[0] = '\0';
    return;
  }
  while (n > 0 && out[n - 1] == '\0') --n;
  for (ssize_t i = 0; i < n; ++i) {
    if (out[i] == '\0') out[i] = ' ';
  }
  out[n] = '\0';
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as NVML spells a UUID.
void FormatUuid(const uint8_t uuid[16], char out[48]) {
  static const char kHex[] = "0123456789abcdef";
  char* p = out;
  memcpy(p, "GPU-", 4);
  p += 4;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
    *p++ = kHex[uuid[i] >> 4];
    *p++ = kHex[uuid[i] & 15];
  }
  *p = '\0';
}

// Lists the device's processes into *out (its time, seq and reason are the caller's).
void List(int32_t device, GpuProcessesRecord* out) {
  out->device = device;
  out->count = 0;
  out->pids = 0;
  out->error[0] = '\0';
  pthread_mutex_lock(&g_nvml_lock);
  OpenNvmlLocked();
  if (g_nvml.unavailable[0] != '\0') {
    snprintf(out->error, sizeof(out->error), "%s", g_nvml.unavailable);
    pthread_mutex_unlock(&g_nvml_lock);
    return;
  }
  char uuid[48];
  FormatUuid(g_uuid[device], uuid);
  NvmlDevice handle = nullptr;
  NvmlReturn r = g_nvml.handle_by_uuid(uuid, &handle);
  if (r != kNvmlSuccess) {
    SetError(out, "nvmlDeviceGetHandleByUUID", r);
    pthread_mutex_unlock(&g_nvml_lock);
    return;
  }
  NvmlProcessInfo infos[64];
  unsigned int count = 64;
  r = g_nvml.compute_processes(handle, &count, infos);
  pthread_mutex_unlock(&g_nvml_lock);
  if (r != kNvmlSuccess && r != kNvmlInsufficientSize) {
    SetError(out, "nvmlDeviceGetComputeRunningProcesses", r);
    return;
  }
  if (count > 64) count = 64;
  const uint32_t self = static_cast<uint32_t>(getpid());
  bool self_listed = false;
  for (unsigned int i = 0; i < count; ++i) self_listed |= infos[i].pid == self;
  // Largest first, so the ones that matter survive the cut to kMaxProcesses.
  for (unsigned int i = 1; i < count; ++i) {
    for (unsigned int j = i; j > 0 && infos[j].used_gpu_memory + 1 > infos[j - 1].used_gpu_memory + 1; --j) {
      NvmlProcessInfo t = infos[j];
      infos[j] = infos[j - 1];
      infos[j - 1] = t;
    }
  }
  out->pids = self_listed ? 1 : count > 0 ? 2 : 0;  // PIDS_SAME, PIDS_OTHER_NAMESPACE, PIDS_UNKNOWN
  for (unsigned int i = 0; i < count && out->count < GpuProcessesRecord::kMaxProcesses; ++i) {
    GpuProcessRecord& p = out->process[out->count++];
    p.pid = infos[i].pid;
    p.used_unknown = infos[i].used_gpu_memory == kNvmlValueNotAvailable;
    p.used_bytes = p.used_unknown ? 0 : infos[i].used_gpu_memory;
    p.self = infos[i].pid == self;
    p.command[0] = '\0';
    if (self_listed) ReadCommand(p.pid, p.command, sizeof(p.command));
  }
}

bool Claim(int64_t* slot, int64_t now_ns, int64_t spacing_ns) {
  int64_t last = __atomic_load_n(slot, __ATOMIC_RELAXED);
  if (last != 0 && now_ns - last < spacing_ns) return false;
  return __atomic_compare_exchange_n(slot, &last, now_ns != 0 ? now_ns : 1, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED);
}

}  // namespace

void NoteDeviceUuid(int32_t device, const uint8_t uuid[16]) {
  if (device < 0 || device >= kMaxDevices) return;
  memcpy(g_uuid[device], uuid, 16);
  __atomic_store_n(&g_has_uuid[device], true, __ATOMIC_RELEASE);
}

void ResetGpuProcessSampling(int64_t interval_ns) {
  g_interval_ns = interval_ns;
  for (int d = 0; d < kMaxDevices; ++d) {
    __atomic_store_n(&g_last_sample_ns[d], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_last_failure_ns[d], 0, __ATOMIC_RELAXED);
  }
}

bool ListGpuProcessesAtFailure(int32_t device, int64_t now_ns, GpuProcessesRecord* out) {
  if (device < 0 || device >= kMaxDevices || !__atomic_load_n(&g_has_uuid[device], __ATOMIC_ACQUIRE)) return false;
  if (!Claim(&g_last_failure_ns[device], now_ns, kFailureSpacingNs)) return false;
  out->time_ns = now_ns;
  out->reason = 2;  // FAILED_ALLOCATION
  List(device, out);
  return true;
}

void SampleGpuProcesses(int64_t now_ns, void (*write)(const GpuProcessesRecord& record)) {
  if (g_interval_ns <= 0) return;
  for (int32_t d = 0; d < kMaxDevices; ++d) {
    if (!__atomic_load_n(&g_has_uuid[d], __ATOMIC_ACQUIRE)) continue;
    if (!Claim(&g_last_sample_ns[d], now_ns, g_interval_ns)) continue;
    GpuProcessesRecord record;
    record.time_ns = now_ns;
    record.reason = 1;  // SAMPLE
    List(d, &record);
    write(record);
  }
}

}  // namespace cumemtrace::preload
