// End-to-end test program for the preload's clock: allocations over about `seconds` (argument; 1.5 by default),
// each bracketed by two reads of CLOCK_MONOTONIC, which it writes to clocked.txt (before_ns after_ns size, one line
// per allocation). The event's time in the trace must lie between the two: clock_gettime is the oracle for the time
// the preload reads from the CPU's counter (preload/clock.h).
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "program_support.h"

namespace {

long long MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  namespace e2e = cumemtrace::e2e;
  const double seconds = argc > 1 ? atof(argv[1]) : 1.5;
  E2E_CHECK_CU(cuInit(0));
  FILE* out = fopen("clocked.txt", "w");
  E2E_CHECK(out != nullptr);
  const long long end = MonotonicNs() + static_cast<long long>(seconds * 1e9);
  for (int round = 0; MonotonicNs() < end; ++round) {
    // Bursts of allocations close together, then a pause: times both within a flush period and across many.
    for (int i = 0; i < 64; ++i) {
      const size_t size = (1 + (round + i) % 7) * e2e::kKiB;
      CUdeviceptr p = 0;
      const long long before = MonotonicNs();
      E2E_CHECK_CU(cuMemAlloc(&p, size));
      const long long after = MonotonicNs();
      fprintf(out, "%lld %lld %zu\n", before, after, size);
      E2E_CHECK_CU(cuMemFree(p));
    }
    usleep(2000);
  }
  E2E_CHECK(fclose(out) == 0);
  return 0;
}
