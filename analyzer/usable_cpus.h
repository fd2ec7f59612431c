// How many CPUs this process may run on: what decides whether a second or third thread pays (the reader's
// delivery thread, PyTorch's allocator replayed on its own thread). Not std::thread::hardware_concurrency(), which
// counts the machine's CPUs: a container or `taskset` that gives the analyzer two of a host's sixteen would
// otherwise start threads that only take turns.
#ifndef CUMEMTRACE_ANALYZER_USABLE_CPUS_H_
#define CUMEMTRACE_ANALYZER_USABLE_CPUS_H_

namespace cumemtrace::analyzer {

// The CPUs in the calling thread's affinity mask; the machine's count where that cannot be read; at least 1.
unsigned UsableCpus();

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_USABLE_CPUS_H_
