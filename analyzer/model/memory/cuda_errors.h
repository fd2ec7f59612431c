// CUDA driver error names (CUresult) for reports.
#ifndef CUMEMTRACE_ANALYZER_MODEL_MEMORY_CUDA_ERRORS_H_
#define CUMEMTRACE_ANALYZER_MODEL_MEMORY_CUDA_ERRORS_H_

#include <cstdint>
#include <string>

namespace cumemtrace::analyzer {

// "CUDA_ERROR_OUT_OF_MEMORY" for 2; nullptr for a code cuda.h does not define.
const char* CudaErrorName(int32_t code);
// CUDA_ERROR_OUT_OF_MEMORY (cudaErrorMemoryAllocation has the same value in the runtime API).
inline constexpr int32_t kCudaErrorOutOfMemory = 2;

// The name, or "error <code>" for an unknown code.
std::string CudaErrorString(int32_t code);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_MEMORY_CUDA_ERRORS_H_
