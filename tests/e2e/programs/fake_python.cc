// A program that embeds a (fake) CPython the way programs embed libpython: it loads libe2e_fake_python_lib.so (or
// the library FAKE_PY_LIB names, in the same folder) with dlopen after start-up, so the preload can only find the interpreter later (its flush thread looks again). Then it
// allocates through the (fake) driver twice, 300 ms apart, so that the second allocation comes after that lookup.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  std::string dir(self, static_cast<size_t>(n));
  dir.resize(dir.rfind('/'));
  const char* lib = getenv("FAKE_PY_LIB");
  if (dlopen((dir + "/" + (lib != nullptr ? lib : "libe2e_fake_python_lib.so")).c_str(), RTLD_NOW | RTLD_GLOBAL) ==
      nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  if (cuInit(0) != CUDA_SUCCESS) return 1;
  CUdeviceptr first = 0, second = 0;
  if (cuMemAlloc_v2(&first, 1 << 20) != CUDA_SUCCESS) return 1;
  usleep(300 * 1000);
  if (cuMemAlloc_v2(&second, 1 << 20) != CUDA_SUCCESS) return 1;
  if (cuMemFree_v2(first) != CUDA_SUCCESS || cuMemFree_v2(second) != CUDA_SUCCESS) return 1;
  std::puts("ok");
  return 0;
}
