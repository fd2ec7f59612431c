// The dlsym hook: programs that dlopen libcuda (the CUDA runtime, static or shared; CuPy; JAX) get their driver
// functions, cuGetProcAddress first of all, through dlsym on a libcuda handle, which never sees this library's
// exported symbols. For such handles the hook returns a wrapper.
//
// RTLD_NEXT and RTLD_DEFAULT are resolved by glibc relative to the caller's object (and its local scope), so for
// them the hook must not be a frame of its own: on x86-64 it jumps straight to the real dlsym with the caller's
// return address intact. Pseudo-handles never need wrapping anyway: for them our own exported hooks come first.
#include <dlfcn.h>
#include <stdint.h>

#include "preload/driver_hooks.h"
#include "preload/symbol_resolver.h"

namespace cumemtrace::preload {
namespace {

void* DlsymWithHandle(void* handle, const char* symbol) {
  DlsymFn real = RealDlsym();
  if (real == nullptr) return nullptr;
  void* p = real(handle, symbol);
  return p == nullptr ? nullptr : WrapDriverSymbol(symbol, p);
}

}  // namespace
}  // namespace cumemtrace::preload

// Called only from the asm below, which link-time optimization cannot see: `used` keeps them.
extern "C" {
__attribute__((visibility("hidden"), used)) void* cumemtrace_dlsym_with_handle(void* handle, const char* symbol) {
  return cumemtrace::preload::DlsymWithHandle(handle, symbol);
}
__attribute__((visibility("hidden"), used)) void* cumemtrace_real_dlsym() {
  return reinterpret_cast<void*>(cumemtrace::preload::RealDlsym());
}
}

#if defined(__x86_64__)
// dlsym(handle, symbol): RTLD_NEXT (-1) and RTLD_DEFAULT (0) tail-jump to glibc's dlsym; other handles go to
// cumemtrace_dlsym_with_handle (also a tail jump: our frame never shows).
asm(R"(
  .text
  .globl dlsym
  .type dlsym, @function
dlsym:
  .cfi_startproc
  cmpq $-1, %rdi
  je 1f
  testq %rdi, %rdi
  je 1f
  jmp cumemtrace_dlsym_with_handle
1:
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  call cumemtrace_real_dlsym
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  testq %rax, %rax
  je 2f
  jmp *%rax
2:
  ret
  .cfi_endproc
  .size dlsym, .-dlsym
)");
#else
#error "cumemtrace's dlsym hook is written for x86-64; other architectures need their own tail-jump"
#endif
