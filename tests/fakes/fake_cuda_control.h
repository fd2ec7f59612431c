// Test double: fake-only controls of the fake libcuda.so.1, which no real CUDA library has.
//
// Why this exists: the fake driver's ledger (the oracle of the end-to-end tests) must say which runtime call a
// driver call served, so that a test can check that cumemtrace labels a cudaMalloc as cudaMalloc. The fake
// libcudart.so.13 finds this function with dlsym() on its libcuda handle (it is not a driver API function, so it is
// never obtained through cuGetProcAddress) and sets the label around each driver call it makes.
//
// Environment variables the fake libcuda.so.1 reads (once, at its first call):
//   FAKE_CUDA_LEDGER=<path>         append one line per served memory call (see fake_ledger.h for the format)
//   FAKE_CUDA_TOTAL_BYTES=<bytes>   device memory per device (default 80 GiB)
//   FAKE_CUDA_FAIL_ABOVE=<bytes>    every memory-allocating call asking for more fails with CUDA_ERROR_OUT_OF_MEMORY
//   FAKE_CUDA_DEVICE=<ordinal>      the current device of a thread that has not set a context (default 0)
//   FAKE_CUDA_DEVICE_COUNT=<n>      number of devices (default 2, at most kFakeCudaMaxDevices)
//
// CUPTI: the real driver calls a CUPTI subscriber around its API functions. The fake libcupti.so.13
// (fake_cupti.cc) registers a callback with FakeCudaSetApiCallback, and every memory function of the fake driver
// calls it at enter and exit with CUPTI's driver callback id and its parameter struct (generated_cuda_meta.h).
// FakeCudaInternalAlloc / FakeCudaInternalFree are an allocation path that interposition cannot see: they call the
// driver's own cuMemAlloc_v2 / cuMemFree_v2 from inside the library (as a library reaching the driver through a
// private export table would), so only CUPTI reports them; the ledger records them like any other call.
// Never include this from cumemtrace itself: the preload must not know it runs on a fake.
#ifndef CUMEMTRACE_TESTS_FAKES_FAKE_CUDA_CONTROL_H_
#define CUMEMTRACE_TESTS_FAKES_FAKE_CUDA_CONTROL_H_

#include <cuda.h>
#include <stddef.h>

inline constexpr int kFakeCudaMaxDevices = 8;
inline constexpr int kFakeCudaDriverVersion = 13000;
// cuMemCreate / cuMemAddressReserve / cuMemMap granularity.
inline constexpr unsigned long long kFakeCudaGranularity = 2ull << 20;
// cuMemAllocPitch's pitch alignment.
inline constexpr unsigned long long kFakeCudaPitchAlignment = 512;
// Preferred start of the fake device address range (where nothing else lives in a normal x86-64 process).
inline constexpr unsigned long long kFakeCudaArenaHint = 0x200000000000ull;

extern "C" {
// `site` 0 = API enter, 1 = API exit (then `result` points at the CUresult about to be returned, else nullptr).
using FakeCudaApiCallback = void (*)(void* userdata, int site, unsigned int cbid, const char* function_name,
                                     const void* params, const CUresult* result);
// Installs (or with nullptr removes) the one API callback.
void FakeCudaSetApiCallback(FakeCudaApiCallback callback, void* userdata);

CUresult FakeCudaInternalAlloc(CUdeviceptr* dptr, size_t bytesize);
CUresult FakeCudaInternalFree(CUdeviceptr dptr);

// A gate in cuMemFree_v2: while closed (FakeCudaCloseFreeGate(1)), each call waits in it, after an interposer has
// taken whatever it takes before the real call (cumemtrace: the free's sequence number), until it opens. So a test
// can hold one thread's free in flight while another thread records. FakeCudaFreeGateWaiters: calls waiting now.
void FakeCudaCloseFreeGate(int closed);
int FakeCudaFreeGateWaiters();

// Labels every ledger line written by the calling thread until called again; nullptr or "" clears the label.
// `runtime_api` must stay valid until the label is cleared (a string literal).
void FakeCudaSetRuntimeCaller(const char* runtime_api);
}

// The name FakeCudaSetRuntimeCaller is looked up by.
inline constexpr char kFakeCudaSetRuntimeCallerSymbol[] = "FakeCudaSetRuntimeCaller";
inline constexpr char kFakeCudaSetApiCallbackSymbol[] = "FakeCudaSetApiCallback";

#endif  // CUMEMTRACE_TESTS_FAKES_FAKE_CUDA_CONTROL_H_
