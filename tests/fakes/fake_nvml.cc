// TEST DOUBLE: a fake libnvidia-ml.so.1, the few NVML calls the preload makes (preload/gpu_processes.cc) with the
// record layouts NVML has: nvmlDeviceGetComputeRunningProcesses_v2 writes 24-byte records (pid, usedGpuMemory,
// gpuInstanceId, computeInstanceId), _v3 32-byte ones as some R535 drivers do (a trap: the preload must not use it),
// the unversioned call 16-byte ones. Devices are found by the UUIDs the fake libcuda.so.1 gives ("FAKECUDA", then
// zeros, then the ordinal). Never linked into anything.
//
// Controls (environment): FAKE_NVML_PROCESSES="PID:BYTES,..." the compute processes of every device, largest or not
// ("self" for the calling process's pid, "?" for memory NVML cannot say); FAKE_NVML_INIT_FAIL=1 nvmlInit fails;
// FAKE_NVML_LOG=path appends one line per nvmlInit (the test of "loaded only when wanted").
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace {

struct ProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
};

constexpr int kSuccess = 0, kInvalidArgument = 2, kDriverNotLoaded = 9, kNotFound = 6, kInsufficientSize = 7;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
  if (const char* log = getenv("FAKE_NVML_LOG")) {
    if (FILE* f = fopen(log, "a")) {
      fprintf(f, "nvmlInit pid=%d\n", getpid());
      fclose(f);
    }
  }
  const char* fail = getenv("FAKE_NVML_INIT_FAIL");
  return fail != nullptr && fail[0] == '1' ? kDriverNotLoaded : kSuccess;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(int result) {
  switch (result) {
    case kSuccess: return "Success";
    case kDriverNotLoaded: return "Driver Not Loaded";
    case kNotFound: return "Not Found";
    case kInsufficientSize: return "Insufficient Size";
    default: return "Unknown Error";
  }
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  // "GPU-" + hex of "FAKECUDA" (46414b45-4355-4441) + "-0000-0000000000NN".
  const char kPrefix[] = "GPU-46414b45-4355-4441-0000-0000000000";
  if (uuid == nullptr || device == nullptr) return kInvalidArgument;
  if (strncmp(uuid, kPrefix, sizeof(kPrefix) - 1) != 0 || strlen(uuid) != sizeof(kPrefix) + 1) return kNotFound;
  *device = reinterpret_cast<void*>(strtoul(uuid + sizeof(kPrefix) - 1, nullptr, 16) + 1);
  return kSuccess;
}

}  // extern "C"

namespace {

// The processes FAKE_NVML_PROCESSES names, written as records of `record_size` bytes.
int Processes(void* device, unsigned int* count, void* records, size_t record_size) {
  if (device == nullptr || count == nullptr) return kInvalidArgument;
  const char* spec = getenv("FAKE_NVML_PROCESSES");
  ProcessInfo parsed[128];
  unsigned int n = 0;
  for (const char* p = spec != nullptr ? spec : ""; *p != '\0' && n < 128;) {
    ProcessInfo& info = parsed[n++];
    info = {};
    if (strncmp(p, "self", 4) == 0) {
      info.pid = static_cast<unsigned int>(getpid());
      p += 4;
    } else {
      char* end = nullptr;
      info.pid = static_cast<unsigned int>(strtoul(p, &end, 10));
      p = end;
    }
    if (*p == ':') ++p;
    if (*p == '?') {
      info.used_gpu_memory = ~0ull;
      ++p;
    } else {
      char* end = nullptr;
      info.used_gpu_memory = strtoull(p, &end, 10);
      p = end;
    }
    if (*p == ',') ++p;
  }
  if (*count < n) {
    *count = n;
    return kInsufficientSize;
  }
  if (n > 0 && records == nullptr) return kInvalidArgument;
  memset(records, 0xee, n * record_size);  // the fields the preload must not read
  for (unsigned int i = 0; i < n; ++i) {
    memcpy(static_cast<char*>(records) + i * record_size, &parsed[i], sizeof(parsed[i]));
  }
  *count = n;
  return kSuccess;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v2(void* device, unsigned int* count,
                                                                                   void* records) {
  return Processes(device, count, records, 24);
}

__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count,
                                                                                   void* records) {
  return Processes(device, count, records, 32);
}

__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses(void* device, unsigned int* count,
                                                                                void* records) {
  return Processes(device, count, records, 16);
}

}  // extern "C"
