// A shared library for end-to-end test program (k): it needs libcudart.so.13 (DT_NEEDED) and makes the runtime mix,
// like a Python extension module (PyTorch's libc10_cuda.so) that the interpreter loads with RTLD_LOCAL.
#include "runtime_mix.h"

extern "C" __attribute__((visibility("default"))) void E2eRunRuntimeMix() { cumemtrace::e2e::RunRuntimeMix(); }
