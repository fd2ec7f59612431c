// Finding the real functions behind the hooks. The real dlsym is bootstrapped with dlvsym (the public dlsym is
// hooked). Real CUDA functions are looked up in the next object after this one (RTLD_NEXT) and, when the library
// is only in a local scope (loaded with RTLD_LOCAL, where RTLD_NEXT cannot see it), in the loaded copy found by
// name with dlopen(RTLD_NOLOAD).
#ifndef CUMEMTRACE_PRELOAD_SYMBOL_RESOLVER_H_
#define CUMEMTRACE_PRELOAD_SYMBOL_RESOLVER_H_

namespace cumemtrace::preload {

using DlsymFn = void* (*)(void*, const char*);

// glibc's dlsym, never the hook.
DlsymFn RealDlsym();

// `symbol` from the next object after libcumemtrace, else from a loaded library whose file name starts with
// `library_prefix` (e.g. "libcuda.so", "libcudart.so"). nullptr if neither has it.
void* ResolveNext(const char* symbol, const char* library_prefix);

// `symbol` from the same loaded library as `function` (a real function pointer of that library).
void* ResolveBeside(const void* function, const char* symbol);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_SYMBOL_RESOLVER_H_
