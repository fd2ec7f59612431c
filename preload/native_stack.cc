#include "preload/native_stack.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <string.h>

#include "preload/config.h"
#include "preload/module_map.h"

namespace cumemtrace::preload {
namespace {

AddressRange g_own;
// Our own frames above the user's (recorder, hook, wrapper): never more than this many.
constexpr int kMaxOwnFrames = 16;

}  // namespace

void InitNativeStacks() {
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  g_own = OwnModuleRange();
}

int CaptureStack(uintptr_t* pcs, int max_depth, bool* truncated) {
  *truncated = false;
  if (max_depth <= 0) return 0;
  void* raw[kMaxStackDepth + kMaxOwnFrames + 1];
  int want = max_depth + kMaxOwnFrames + 1;
  int n = unw_backtrace(raw, want);
  if (n <= 0) return -1;
  int skip = 0;
  while (skip < n && g_own.Contains(reinterpret_cast<uintptr_t>(raw[skip]))) ++skip;
  int count = n - skip;
  if (count > max_depth) {
    count = max_depth;
    *truncated = true;
  } else if (n == want) {
    *truncated = true;  // the own-frame allowance was not enough to reach the bottom
  }
  for (int i = 0; i < count; ++i) pcs[i] = reinterpret_cast<uintptr_t>(raw[skip + i]);
  return count;
}

}  // namespace cumemtrace::preload
