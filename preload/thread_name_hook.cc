// pthread_setname_np: a thread that renames itself (PyTorch's pin-memory thread becomes "pt_data_pin") has its
// new name written with its next event.
#include <pthread.h>

#include "preload/recorder.h"
#include "preload/symbol_resolver.h"

extern "C" __attribute__((visibility("default"))) int pthread_setname_np(pthread_t thread, const char* name) {
  using Fn = int (*)(pthread_t, const char*);
  static Fn real = nullptr;  // a race resolves the same value
  if (real == nullptr) real = reinterpret_cast<Fn>(cumemtrace::preload::ResolveNext("pthread_setname_np", nullptr));
  if (real == nullptr) return 38;  // ENOSYS
  int r = real(thread, name);
  if (r == 0 && pthread_equal(thread, pthread_self())) cumemtrace::preload::NoteThreadRenamed();
  return r;
}
