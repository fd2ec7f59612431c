#include "preload/symbol_resolver.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

namespace cumemtrace::preload {
namespace {

struct FindLibrary {
  const char* prefix;
  char path[512];
};

int OnModule(dl_phdr_info* info, size_t, void* data) {
  auto* find = static_cast<FindLibrary*>(data);
  const char* name = info->dlpi_name;
  if (name == nullptr || name[0] == '\0') return 0;
  const char* base = strrchr(name, '/');
  base = base == nullptr ? name : base + 1;
  if (strncmp(base, find->prefix, strlen(find->prefix)) != 0) return 0;
  strncpy(find->path, name, sizeof(find->path) - 1);
  find->path[sizeof(find->path) - 1] = '\0';
  return 1;
}

}  // namespace

DlsymFn RealDlsym() {
  static DlsymFn real = nullptr;  // written once; a race writes the same value
  if (real == nullptr) {
    // glibc 2.34 moved dlsym into libc.so.6 under a new version; older glibc only has the 2.2.5 one.
    void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (p == nullptr) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    real = reinterpret_cast<DlsymFn>(p);
  }
  return real;
}

void* ResolveNext(const char* symbol, const char* library_prefix) {
  DlsymFn dlsym_fn = RealDlsym();
  if (dlsym_fn == nullptr) return nullptr;
  void* p = dlsym_fn(RTLD_NEXT, symbol);
  if (p != nullptr || library_prefix == nullptr) return p;
  FindLibrary find{library_prefix, {}};
  if (dl_iterate_phdr(OnModule, &find) == 0) return nullptr;
  void* handle = dlopen(find.path, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  p = dlsym_fn(handle, symbol);
  dlclose(handle);  // drops only the reference RTLD_NOLOAD added
  return p;
}

void* ResolveBeside(const void* function, const char* symbol) {
  DlsymFn dlsym_fn = RealDlsym();
  Dl_info info;
  if (dlsym_fn == nullptr || dladdr(function, &info) == 0 || info.dli_fname == nullptr) return nullptr;
  void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* p = dlsym_fn(handle, symbol);
  dlclose(handle);
  return p;
}

}  // namespace cumemtrace::preload
