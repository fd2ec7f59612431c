// Interposition of the CUDA driver's memory functions, reached every way programs reach them: the exported
// symbols (this library defines them), dlsym on a libcuda handle (dlsym_hook.cc asks WrapDriverSymbol), and the
// pointers that cuGetProcAddress* and cudaGetDriverEntryPoint* hand out (WrapDriverEntryPoint). Each real pointer
// gets a wrapper bound to exactly that pointer (a fixed number of slots per function), so per-thread-stream
// variants and pointers from different routes all stay distinct and all reach the recorder.
#ifndef CUMEMTRACE_PRELOAD_DRIVER_HOOKS_H_
#define CUMEMTRACE_PRELOAD_DRIVER_HOOKS_H_

namespace cumemtrace::preload {

// For dlsym(handle, symbol) that returned `real`: the wrapper to hand out instead, or `real` itself when the
// symbol is not a hooked driver function (or no slot is left).
void* WrapDriverSymbol(const char* symbol, void* real);

// For cuGetProcAddress(name, &real, version, ...) and the runtime's entry-point functions: the same by base name
// ("cuMemAlloc") and the ABI version asked for.
void* WrapDriverEntryPoint(const char* name, int version, void* real);

// True if `function` lies in this library (a wrapper already).
bool IsOwnFunction(const void* function);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_DRIVER_HOOKS_H_
