// End-to-end test program (f): a program with the runtime built in, the way nvcc's default `-cudart static` and
// CuPy reach the driver: no cuda* symbol is exported or imported; an embedded runtime initializes itself once, on
// whichever thread first needs it, by dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2") and a table of driver
// functions filled through cuGetProcAddress_v2; the program's memory calls go through that table.
#include <pthread.h>

#include <thread>

#include "program_support.h"

namespace {

namespace e2e = cumemtrace::e2e;

// The embedded runtime: initialized once (pthread_once, like the static cudart's context setup).
class EmbeddedRuntime {
 public:
  static const e2e::DriverApi& Driver() {
    pthread_once(&once_, &Initialize);
    return api_;
  }

 private:
  static void Initialize() {
    void* driver = e2e::OpenDriver();
    auto get_proc_address = reinterpret_cast<e2e::GetProcAddressFn>(e2e::Symbol(driver, "cuGetProcAddress_v2"));
    e2e::FillByGetProcAddress(get_proc_address, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &api_);
    E2E_CHECK_CU(api_.init(0));
  }

  static inline pthread_once_t once_ = PTHREAD_ONCE_INIT;
  static inline e2e::DriverApi api_;
};

}  // namespace

int main() {
  // The runtime initializes on a helper thread (as when a library's first CUDA call is made off the main thread).
  std::thread([] { EmbeddedRuntime::Driver(); }).join();
  e2e::RunDriverMix(EmbeddedRuntime::Driver());
  return 0;
}
