// CUPTI as a second source of memory events (CUMEMTRACE_CUPTI=1). Interposition misses calls that reach the driver
// through routes it cannot wrap; CUPTI's driver-domain callbacks see every call of the memory APIs. Only one CUPTI
// subscriber may exist per process (a second one, e.g. torch.profiler, silently loses its data), so this is opt-in,
// and when CUPTI cannot be loaded or subscribed it says so once and steps aside: interposition goes on alone.
//
// libcupti is never linked: the one the process already has is used (RTLD_NOLOAD), else one found by name or in the
// toolkit's usual folders, opened with dlopen. With CUMEMTRACE_CUPTI unset nothing here runs.
//
// Never: record a call that interposition is already recording (the hooks' thread-local driver_depth, in_recorder
// and runtime label say so), call into CUPTI from the event path, or change errno.
#ifndef CUMEMTRACE_PRELOAD_CUPTI_SOURCE_H_
#define CUMEMTRACE_PRELOAD_CUPTI_SOURCE_H_

#include <stddef.h>

namespace cumemtrace::preload {

// Loads CUPTI and subscribes to the driver-domain callbacks of the memory APIs in format.h's api table. Returns
// true when subscribed (also when already subscribed in this process, e.g. before a fork); otherwise false with
// the reason in `why`.
bool StartCupti(char* why, size_t why_size);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_CUPTI_SOURCE_H_
