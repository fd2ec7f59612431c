// Who else uses a GPU: the processes NVML lists on a device with the memory each holds, so that an OOM beside
// another job names it ("pid 503, python serve.py, 74.2 GiB") as PyTorch's own OOM message does, from the same
// source (nvmlDeviceGetComputeRunningProcesses).
//
// NVML (libnvidia-ml.so.1) is opened with dlopen the first time a list is wanted, which is only once the program
// uses CUDA (a device was seen), and is never required: without it each list is an error string saying why. Lists
// are taken at a failed allocation (on the failing thread, at most one per device per second: the failure path is
// already slow) and every CUMEMTRACE_PROCESS_SAMPLE_MS on the flush thread (never on the program's threads).
//
// Pids: NVML names processes in the pid namespace of the driver. When this process's own pid is in the list, the
// pids are ours and each one's command line is read from /proc; when this process holds memory on the device but
// is not in the list, the pids belong to another namespace (a container's host) and no command line is read, since
// /proc here would name unrelated processes.
//
// Never: called with the recorder's lock held; allocates from the heap only inside dlopen/NVML's own first init.
#ifndef CUMEMTRACE_PRELOAD_GPU_PROCESSES_H_
#define CUMEMTRACE_PRELOAD_GPU_PROCESSES_H_

#include <stdint.h>

#include "preload/trace_writer.h"

namespace cumemtrace::preload {

// The device's UUID (cuDeviceGetUuid), learned when its Device packet is written: NVML's handle is found by it, so
// that CUDA_VISIBLE_DEVICES renumbering cannot mix devices up.
void NoteDeviceUuid(int32_t device, const uint8_t uuid[16]);

// Sets the periodic interval (0: no periodic lists; lists at failed allocations stay). Forgets the last lists.
void ResetGpuProcessSampling(int64_t interval_ns);

// After a failed allocation on `device`: whether a list is due (the device is known; at most one per device per
// second). Then ListGpuProcessesAtFailure fills `*out` (reason FAILED_ALLOCATION), waiting at most 200 ms for a
// listing under way on another thread (else `error` says so).
bool GpuProcessesDueAtFailure(int32_t device, int64_t now_ns);
void ListGpuProcessesAtFailure(int32_t device, int64_t now_ns, GpuProcessesRecord* out);

// In a forked child: the parent's lock state and devices are not the child's (its trace describes its own).
void ResetGpuProcessesInForkedChild();

// On the flush thread: calls write(record) for each known device whose periodic list is due.
void SampleGpuProcesses(int64_t now_ns, void (*write)(GpuProcessesRecord& record));

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_GPU_PROCESSES_H_
