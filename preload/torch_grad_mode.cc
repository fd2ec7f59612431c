#include "preload/torch_grad_mode.h"

#include <string.h>

#include <atomic>

#include "preload/elf_symbols.h"
#include "preload/module_map.h"
#include "preload/recorder.h"

namespace cumemtrace::preload {
namespace {

// bool c10::GradMode::is_enabled()
constexpr char kIsEnabledSymbol[] = "_ZN3c108GradMode10is_enabledEv";

// Declared as returning a byte, which is how the ABI returns a bool (the low byte of the return register): so that
// the check below sees what the function answered, where a `bool` the compiler may assume to be 0 or 1.
using IsEnabledFn = uint8_t (*)();
std::atomic<IsEnabledFn> g_is_enabled{nullptr};

struct Found {
  uint64_t address = 0;
  uint64_t size = 0;
};

void Visit(const char* name, uint64_t address, uint64_t size, void* context) {
  if (strcmp(name, kIsEnabledSymbol) != 0) return;
  auto* found = static_cast<Found*>(context);
  found->address = address;
  found->size = size;
}

// The folder part of `path` (with its slash) is `dir`'s.
bool SameFolder(const char* a, const char* b) {
  const char* slash_a = strrchr(a, '/');
  const char* slash_b = strrchr(b, '/');
  if (slash_a == nullptr || slash_b == nullptr) return slash_a == slash_b;
  return slash_a - a == slash_b - b && strncmp(a, b, static_cast<size_t>(slash_a - a)) == 0;
}

void Unknown(const char* why) { NoteOnce(format::NoticeCode::kGradModeUnknown, why); }

}  // namespace

void LearnGradMode(const char* c10_cuda_path) {
  static bool learned = false;  // the attach may be tried again (allocator not initialized yet): learn once
  if (learned) return;
  learned = true;
  ModuleEntry c10;
  bool found_module = false;
  // The module map's lock is only tried (the recorder never waits for it here): try a few times.
  for (int attempt = 0; attempt < 100 && !found_module; ++attempt) {
    size_t next = 0;
    found_module = FindLoadedModule("libc10.so", &next, &c10);
    while (found_module && !SameFolder(c10.path, c10_cuda_path)) {
      ++next;
      found_module = FindLoadedModule("libc10.so", &next, &c10);
    }
  }
  if (!found_module) {
    Unknown("no libc10.so beside libc10_cuda.so: autograd's grad mode unknown for every block");
    return;
  }
  Found found;
  if (ForEachElfSymbol(c10.path, Visit, &found) == ElfScan::kNoFile || found.address == 0 || found.size == 0) {
    Unknown("libc10.so has no c10::GradMode::is_enabled() (unknown PyTorch): autograd's grad mode unknown for every "
            "block");
    return;
  }
  const uint64_t address = found.address + c10.load_bias;
  if (address < c10.start || address >= c10.end) {
    Unknown("c10::GradMode::is_enabled() is not in libc10.so's code: autograd's grad mode unknown for every block");
    return;
  }
  auto fn = reinterpret_cast<IsEnabledFn>(address);
  if (fn() > 1) {
    Unknown("c10::GradMode::is_enabled() did not answer a bool: autograd's grad mode unknown for every block");
    return;
  }
  g_is_enabled.store(fn, std::memory_order_release);
}

format::Api TorchAllocApi() {
  IsEnabledFn fn = g_is_enabled.load(std::memory_order_acquire);
  if (fn == nullptr) return format::Api::kTorchAlloc;
  return fn() != 0 ? format::Api::kTorchAllocGrad : format::Api::kTorchAllocNoGrad;
}

}  // namespace cumemtrace::preload
