#include "analyzer/usable_cpus.h"

#include <sched.h>

#include <thread>

namespace cumemtrace::analyzer {

unsigned UsableCpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
    const int count = CPU_COUNT(&mask);
    if (count > 0) return static_cast<unsigned>(count);
  }
  const unsigned machine = std::thread::hardware_concurrency();  // 0 when unknown
  return machine > 0 ? machine : 1;
}

}  // namespace cumemtrace::analyzer
