// pthread_setname_np: a thread that renames itself (PyTorch's pin-memory thread becomes "pt_data_pin") has its
// new name written with its next event.
#include "preload/thread_name_hook.h"

#include <errno.h>

#include <atomic>

#include "preload/recorder.h"
#include "preload/symbol_resolver.h"

namespace cumemtrace::preload {
namespace {

using SetNameFn = int (*)(pthread_t, const char*);
std::atomic<SetNameFn> g_real{nullptr};  // a race resolves the same value

SetNameFn Resolve() {
  SetNameFn real = g_real.load(std::memory_order_acquire);
  if (real == nullptr) {
    real = reinterpret_cast<SetNameFn>(ResolveNext("pthread_setname_np", nullptr));
    g_real.store(real, std::memory_order_release);
  }
  return real;
}

}  // namespace

void ResolveThreadNaming() { Resolve(); }

int NameThread(pthread_t thread, const char* name) {
  const SetNameFn real = g_real.load(std::memory_order_acquire);
  return real == nullptr ? ENOSYS : real(thread, name);
}

}  // namespace cumemtrace::preload

extern "C" __attribute__((visibility("default"))) int pthread_setname_np(pthread_t thread, const char* name) {
  const cumemtrace::preload::SetNameFn real = cumemtrace::preload::Resolve();
  if (real == nullptr) return ENOSYS;
  int r = real(thread, name);
  if (r == 0 && pthread_equal(thread, pthread_self())) cumemtrace::preload::NoteThreadRenamed();
  return r;
}
