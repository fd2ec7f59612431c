#include "preload/gpu_processes.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
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
// The records NVML fills: pid (unsigned int) then usedGpuMemory (unsigned long long), then fields that depend on
// the call's version. _v2 writes nvmlProcessInfo_v2_t, 24 bytes, unchanged since CUDA 11; the unversioned call
// (v1) 16 bytes. _v3 is not used: some R535 drivers write 32-byte records there. The buffer has room for 32-byte
// records all the same, so that a driver writing larger ones than its version says cannot overrun it.
struct NvmlRecordHead {
  unsigned int pid;
  unsigned long long used_gpu_memory;
};
static_assert(sizeof(NvmlRecordHead) == 16, "nvmlProcessInfo_v1_t is 16 bytes");
constexpr unsigned int kMaxRecords = 64;
constexpr size_t kRecordRoom = 32;

struct Nvml {
  NvmlReturn (*init)();
  NvmlReturn (*handle_by_uuid)(const char* uuid, NvmlDevice* device);
  NvmlReturn (*compute_processes)(NvmlDevice device, unsigned int* count, void* records);
  size_t record_size;  // of the records compute_processes writes
  const char* (*error_string)(NvmlReturn result);
  char unavailable[96];  // why NVML cannot be used ("" when it can)
};

// Held while NVML is opened or asked (the flush thread and failing threads may both want a list).
pthread_mutex_t g_nvml_lock = PTHREAD_MUTEX_INITIALIZER;
bool g_nvml_tried = false;
Nvml g_nvml;
alignas(8) unsigned char g_records[kMaxRecords * kRecordRoom];  // under g_nvml_lock

constexpr int kMaxDevices = 64;
uint8_t g_uuid[kMaxDevices][16];
// Per device: 0 no UUID yet, 1 being written, 2 published (g_uuid[device] readable).
uint8_t g_uuid_state[kMaxDevices];
constexpr uint8_t kUuidPublished = 2;
int64_t g_interval_ns = 0;
int64_t g_last_sample_ns[kMaxDevices];   // __atomic
int64_t g_last_failure_ns[kMaxDevices];  // __atomic
constexpr int64_t kFailureSpacingNs = 1000000000;
constexpr int64_t kFailureWaitNs = 200000000;  // a failing thread waits at most this long for a listing under way
constexpr int64_t kFlushWaitNs = 2000000000;

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
  using ProcessesFn = NvmlReturn (*)(NvmlDevice, unsigned int*, void*);
  g_nvml.compute_processes = reinterpret_cast<ProcessesFn>(dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v2"));
  g_nvml.record_size = 24;
  if (g_nvml.compute_processes == nullptr) {
    g_nvml.compute_processes = reinterpret_cast<ProcessesFn>(dlsym(lib, "nvmlDeviceGetComputeRunningProcesses"));
    g_nvml.record_size = sizeof(NvmlRecordHead);
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

// Lists the device's processes into *out (its time, seq and reason are the caller's). `wait_ns` bounds the wait for
// another thread's listing (a failing thread never waits long: the program is waiting for its allocation).
void List(int32_t device, GpuProcessesRecord* out, int64_t wait_ns) {
  out->device = device;
  out->count = 0;
  out->pids = 0;
  out->error[0] = '\0';
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += static_cast<time_t>(wait_ns / 1000000000);
  deadline.tv_nsec += static_cast<long>(wait_ns % 1000000000);
  if (deadline.tv_nsec >= 1000000000) {
    deadline.tv_nsec -= 1000000000;
    ++deadline.tv_sec;
  }
  if (pthread_mutex_timedlock(&g_nvml_lock, &deadline) != 0) {
    snprintf(out->error, sizeof(out->error), "NVML busy on another thread: not listed");
    return;
  }
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
  unsigned int count = kMaxRecords;
  r = g_nvml.compute_processes(handle, &count, g_records);
  if (r == kNvmlInsufficientSize) {  // only the count was set: nothing to read
    snprintf(out->error, sizeof(out->error), "more than %u processes on the device: not listed", kMaxRecords);
    pthread_mutex_unlock(&g_nvml_lock);
    return;
  }
  if (r != kNvmlSuccess) {
    SetError(out, "nvmlDeviceGetComputeRunningProcesses", r);
    pthread_mutex_unlock(&g_nvml_lock);
    return;
  }
  if (count > kMaxRecords) count = kMaxRecords;
  NvmlRecordHead infos[kMaxRecords];
  for (unsigned int i = 0; i < count; ++i) memcpy(&infos[i], g_records + i * g_nvml.record_size, sizeof(infos[i]));
  pthread_mutex_unlock(&g_nvml_lock);
  const uint32_t self = static_cast<uint32_t>(getpid());
  bool self_listed = false;
  for (unsigned int i = 0; i < count; ++i) self_listed |= infos[i].pid == self;
  // Largest first, so the ones that matter survive the cut; NVML's "not available" (all ones, + 1 wraps to 0) last.
  for (unsigned int i = 1; i < count; ++i) {
    for (unsigned int j = i; j > 0 && infos[j].used_gpu_memory + 1 > infos[j - 1].used_gpu_memory + 1; --j) {
      NvmlRecordHead t = infos[j];
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

bool HasUuid(int32_t device) {
  return device >= 0 && device < kMaxDevices &&
         __atomic_load_n(&g_uuid_state[device], __ATOMIC_ACQUIRE) == kUuidPublished;
}

void NoteDeviceUuid(int32_t device, const uint8_t uuid[16]) {
  if (device < 0 || device >= kMaxDevices) return;
  uint8_t unset = 0;  // the first thread to describe the device writes it; the others leave it
  if (!__atomic_compare_exchange_n(&g_uuid_state[device], &unset, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    return;
  }
  memcpy(g_uuid[device], uuid, 16);
  __atomic_store_n(&g_uuid_state[device], kUuidPublished, __ATOMIC_RELEASE);
}

void ResetGpuProcessesInForkedChild() {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;  // another thread of the parent may have held it
  g_nvml_lock = fresh;
  for (int d = 0; d < kMaxDevices; ++d) __atomic_store_n(&g_uuid_state[d], 0, __ATOMIC_RELAXED);
}

void ResetGpuProcessSampling(int64_t interval_ns) {
  g_interval_ns = interval_ns;
  for (int d = 0; d < kMaxDevices; ++d) {
    __atomic_store_n(&g_last_sample_ns[d], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_last_failure_ns[d], 0, __ATOMIC_RELAXED);
  }
}

bool GpuProcessesDueAtFailure(int32_t device, int64_t now_ns) {
  return HasUuid(device) && Claim(&g_last_failure_ns[device], now_ns, kFailureSpacingNs);
}

void ListGpuProcessesAtFailure(int32_t device, int64_t now_ns, GpuProcessesRecord* out) {
  out->time_ns = now_ns;
  out->reason = 2;  // FAILED_ALLOCATION
  List(device, out, kFailureWaitNs);
}

void SampleGpuProcesses(int64_t now_ns, void (*write)(GpuProcessesRecord& record)) {
  if (g_interval_ns <= 0) return;
  for (int32_t d = 0; d < kMaxDevices; ++d) {
    if (!HasUuid(d) || !Claim(&g_last_sample_ns[d], now_ns, g_interval_ns)) continue;
    static GpuProcessesRecord record;  // the flush thread's alone; kept off its small stack
    record.time_ns = now_ns;
    record.reason = 1;  // SAMPLE
    List(d, &record, kFlushWaitNs);
    write(record);
  }
}

}  // namespace cumemtrace::preload
