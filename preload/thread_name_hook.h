// Thread names, both ways: the program's pthread_setname_np is hooked (thread_name_hook.cc) so that a thread that
// renames itself gets its new name in the trace; the preload names its own flush thread with the real function.
#ifndef CUMEMTRACE_PRELOAD_THREAD_NAME_HOOK_H_
#define CUMEMTRACE_PRELOAD_THREAD_NAME_HOOK_H_

#include <pthread.h>

namespace cumemtrace::preload {

// Finds the real pthread_setname_np. Called once at load, where no lock of the recorder is held: dlsym takes the
// loader's lock, which a thread inside dlopen may hold while it waits for the recorder's.
void ResolveThreadNaming();

// Names `thread` with the real function found at load (never looked up here). Returns its result, or ENOSYS when
// none was found.
int NameThread(pthread_t thread, const char* name);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_THREAD_NAME_HOOK_H_
