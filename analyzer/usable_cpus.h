// How many CPUs this process may use: what decides whether a second or third thread pays (the reader's delivery
// thread, PyTorch's allocator replayed on its own thread). Not std::thread::hardware_concurrency(), which counts
// the machine's CPUs: a container or `taskset` that gives the analyzer two of a host's sixteen would otherwise
// start threads that only take turns. Both ways a container limits CPUs count: a CPU set (the affinity mask) and a
// CPU quota (the cgroup's cpu.max, or cpu.cfs_quota_us under cgroup v1, as `docker --cpus=2` sets it).
#ifndef CUMEMTRACE_ANALYZER_USABLE_CPUS_H_
#define CUMEMTRACE_ANALYZER_USABLE_CPUS_H_

#include "absl/strings/string_view.h"

namespace cumemtrace::analyzer {

// The CPUs in the calling thread's affinity mask (the machine's count where that cannot be read), at most what
// the process's CPU quota allows; at least 1.
unsigned UsableCpus();

// The CPUs a quota allows, rounded up, from cgroup v2's cpu.max text ("QUOTA PERIOD", or "max PERIOD" for none);
// 0 for no limit or text that is not a quota.
unsigned CpusOfQuota(absl::string_view cpu_max);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_USABLE_CPUS_H_
