// End-to-end test program (k): the shared runtime in a local scope only. The program does not link libcudart; it
// dlopen()s a library that does, with RTLD_LOCAL, the way Python loads an extension module (PyTorch, ctypes). The
// library's cudaMalloc calls bind to cumemtrace's exported hooks (the preload comes first in the global scope), but
// the real cudaMalloc is then invisible to dlsym(RTLD_NEXT, ...) (docs/design.md): the hooks must still reach it, and
// label each call once.
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <string>

#include "program_support.h"

int main() {
  char self[PATH_MAX] = {};
  E2E_CHECK(readlink("/proc/self/exe", self, sizeof(self) - 1) > 0);
  std::string plugin(self);
  plugin = plugin.substr(0, plugin.rfind('/') + 1) + "libe2e_runtime_plugin.so";
  void* handle = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  E2E_CHECK(handle != nullptr);
  auto run = reinterpret_cast<void (*)()>(cumemtrace::e2e::Symbol(handle, "E2eRunRuntimeMix"));
  run();
  return 0;
}
