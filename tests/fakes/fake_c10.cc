// TEST DOUBLE: a fake libc10.so, the part of PyTorch's core library the preload asks (preload/torch_grad_mode.cc):
// autograd's grad mode, `bool c10::GradMode::is_enabled()`, thread-local and on by default as in PyTorch, exported
// under the same mangled name from a library built with hidden visibility. fake_c10_cuda links it, as the real
// libc10_cuda.so links libc10.so, so both sit in one folder. Never linked into anything but test programs.
#include <stdio.h>

namespace c10 {
struct __attribute__((visibility("default"))) GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

namespace {
thread_local bool t_grad_mode = true;
}  // namespace

bool GradMode::is_enabled() { return t_grad_mode; }
void GradMode::set_enabled(bool enabled) { t_grad_mode = enabled; }
}  // namespace c10

// What torch.no_grad() does, for test programs.
extern "C" __attribute__((visibility("default"))) void fake_torch_set_grad_enabled(int enabled) {
  c10::GradMode::set_enabled(enabled != 0);
}
