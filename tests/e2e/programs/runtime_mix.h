// The fixed, deterministic mix of runtime memory calls made by the programs that use the shared runtime: every
// runtime memory API, a freed address handed out again, a second device, the planted failure, calls that make no
// driver call (cudaMalloc of 0 bytes, cudaFree(nullptr)), and leaks. Exits 1 when something it asserts fails.
#ifndef CUMEMTRACE_TESTS_E2E_PROGRAMS_RUNTIME_MIX_H_
#define CUMEMTRACE_TESTS_E2E_PROGRAMS_RUNTIME_MIX_H_

namespace cumemtrace::e2e {

void RunRuntimeMix();

}  // namespace cumemtrace::e2e

#endif  // CUMEMTRACE_TESTS_E2E_PROGRAMS_RUNTIME_MIX_H_
