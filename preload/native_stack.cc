#include "preload/native_stack.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <string.h>

#include "preload/config.h"
#include "preload/module_map.h"

namespace cumemtrace::preload {
namespace {

// Our own frames in a stack (recorder, hooks, wrappers): never more than this many.
constexpr int kMaxOwnFrames = 16;

}  // namespace

void InitNativeStacks() {
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  OwnModuleRange();  // found now, outside any hook's hot path
}

int CaptureStack(uintptr_t* pcs, int max_depth, bool* truncated) {
  *truncated = false;
  if (max_depth <= 0) return 0;
  void* raw[kMaxStackDepth + kMaxOwnFrames + 1];
  int want = max_depth + kMaxOwnFrames + 1;
  int n = unw_backtrace(raw, want);
  if (n <= 0) return -1;
  // Every frame of this library goes: the recorder and hook frames above the caller, and the runtime hook's frame
  // in the middle of a stack (user code -> our cudaMalloc -> the real cudaMalloc -> our driver hook).
  const AddressRange& own = OwnModuleRange();
  int count = 0;
  for (int i = 0; i < n && count < max_depth; ++i) {
    uintptr_t pc = reinterpret_cast<uintptr_t>(raw[i]);
    if (!own.Contains(pc)) pcs[count++] = pc;
  }
  if (count == max_depth || n == want) *truncated = true;
  return count;
}

}  // namespace cumemtrace::preload
