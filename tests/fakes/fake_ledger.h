// Test double support: the ground-truth ledger of the fake libcuda.so.1, the oracle of the end-to-end tests.
//
// Why this exists: a test of cumemtrace must not trust cumemtrace. The fake driver writes down every memory call it
// served, independently of the preload, and a test compares the trace against these lines. One line per call,
// written with a single write(2) on an O_APPEND descriptor while the driver's state lock is held, so lines never
// interleave, their order is the order in which the driver changed its state, and a forked child's lines go to the
// same file (they carry its pid). Format (the first five fields are fixed; the rest are key=value, in this order):
//
//   <op> <api> 0x<address> <size> <result> pid=<pid> tid=<tid> dev=<device>
//       [stream=0x<stream>] [aux=0x<aux>] [free=<bytes> total=<bytes>] [via=<runtime api>]
//
//   op      alloc | free (by the api: cuMemCreate, cuMemAddressReserve and cuMemMap are allocs; cuMemRelease,
//           cuMemAddressFree and cuMemUnmap are frees)
//   api     the exact exported function that served the call, e.g. cuMemAlloc_v2, cuMemAllocAsync_ptsz
//   address what the call returned or was given (cuMemCreate / cuMemRelease: the handle), 0 when a failed
//           allocation returned nothing
//   size    bytes allocated (cuMemAllocPitch: pitch * height), or asked for by a failed allocation; 0 for frees
//   result  the CUresult returned
//   dev     the device of the memory (for host memory: the caller's current device)
//   stream  for the stream-ordered calls; aux for cuMemMap (the handle mapped)
//   free/total  on a failed allocation: the device's free and total memory right after it failed
//   via     the runtime call of the fake libcudart.so.13 that made this driver call (FakeCudaSetRuntimeCaller)
#ifndef CUMEMTRACE_TESTS_FAKES_FAKE_LEDGER_H_
#define CUMEMTRACE_TESTS_FAKES_FAKE_LEDGER_H_

#include <cstdint>

namespace cumemtrace::fakes {

struct LedgerLine {
  const char* op = "";
  const char* api = "";
  uint64_t address = 0;
  uint64_t size = 0;
  int result = 0;
  int device = 0;
  bool has_stream = false;
  uint64_t stream = 0;
  bool has_aux = false;
  uint64_t aux = 0;
  bool has_mem_info = false;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  const char* via = nullptr;
};

class Ledger {
 public:
  // Opens (creating, appending) the file named by FAKE_CUDA_LEDGER; without it, Write does nothing.
  Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // Appends one line; safe from any thread, leaves errno as it was.
  void Write(const LedgerLine& line) const;

 private:
  int fd_ = -1;
};

}  // namespace cumemtrace::fakes

#endif  // CUMEMTRACE_TESTS_FAKES_FAKE_LEDGER_H_
