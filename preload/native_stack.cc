#include "preload/native_stack.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <string.h>

#include <atomic>

#include "preload/config.h"
#include "preload/module_map.h"
#include "preload/unwind_memo.h"

namespace cumemtrace::preload {
namespace {

// The most frames of ours seen in one stack so far (a handful: the recorder and hook frames above the caller, and
// a runtime hook's frame in the middle). A stack is unwound to max_depth + this + 1 frames, not max_depth +
// kMaxOwnFrames + 1: the frames past what is kept cost as much to unwind as the kept ones. A path with more of our
// frames than seen before is unwound again with the full margin, once, and raises it.
std::atomic<int> g_own_frames_seen{0};

void NoteOwnFrames(int own) {
  int seen = g_own_frames_seen.load(std::memory_order_relaxed);
  while (own > seen && !g_own_frames_seen.compare_exchange_weak(seen, own, std::memory_order_relaxed)) {
  }
}

}  // namespace

void InitNativeStacks() {
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  OwnModuleRange();  // found now, outside any hook's hot path
  InitUnwindMemo();
}

int OutermostFramesKept(int max_depth) { return max_depth < 4 ? 0 : max_depth / 4; }

namespace {

// Frames of a deep stack taken with unw_backtrace's cached fast path (8 KiB of the calling thread's stack, only
// while a deep stack is taken). Deeper still (runaway recursion): the slow walk below.
constexpr int kDeepFrames = 1024;

// Keeps the innermost and outermost frames of raw[0, n) (ours left out) in pcs; returns the count.
int KeepEnds(void* const* raw, int n, uintptr_t* pcs, int max_depth, uint32_t* dropped) {
  const AddressRange& own = OwnModuleRange();
  const int outer = OutermostFramesKept(max_depth);
  int total = 0;
  for (int i = 0; i < n; ++i) total += own.Contains(reinterpret_cast<uintptr_t>(raw[i])) ? 0 : 1;
  const int skip_from = total <= max_depth ? total : max_depth - outer;  // program frames [skip_from, skip_to) go
  const int skip_to = total <= max_depth ? total : total - outer;
  int seen = 0, count = 0;
  for (int i = 0; i < n; ++i) {
    const uintptr_t pc = reinterpret_cast<uintptr_t>(raw[i]);
    if (own.Contains(pc)) continue;
    if (seen < skip_from || seen >= skip_to) pcs[count++] = pc;
    ++seen;
  }
  *dropped = static_cast<uint32_t>(skip_to - skip_from);
  return count;
}

// A stack deeper than kDeepFrames: walks it all with unw_step (tens of microseconds), keeping the innermost frames
// in place and the outermost ones in a ring.
int WalkDeepStack(uintptr_t* pcs, int max_depth, uint32_t* dropped) {
  constexpr int kMaxSteps = 1 << 16;  // a broken chain must not hang the program
  const int outer = OutermostFramesKept(max_depth);
  const int inner = max_depth - outer;
  uintptr_t ring[kMaxStackDepth];
  int total = 0;  // frames of the program seen (ours left out)
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return -1;
  const AddressRange& own = OwnModuleRange();
  for (int steps = 0; steps < kMaxSteps; ++steps) {
    unw_word_t ip = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    const uintptr_t pc = static_cast<uintptr_t>(ip);
    if (!own.Contains(pc)) {
      if (total < inner) {
        pcs[total] = pc;
      } else if (outer > 0) {
        ring[(total - inner) % outer] = pc;
      }
      ++total;
    }
    if (unw_step(&cursor) <= 0) break;
  }
  if (total <= max_depth) {  // not deeper after all: the ring holds frames inner.. in order
    for (int i = inner; i < total; ++i) pcs[i] = ring[(i - inner) % (outer > 0 ? outer : 1)];
    return total;
  }
  const int beyond = total - inner;  // frames that went through the ring; the last `outer` of them are kept
  for (int i = 0; i < outer; ++i) pcs[inner + i] = ring[(beyond - outer + i) % outer];
  *dropped = static_cast<uint32_t>(total - max_depth);
  return max_depth;
}

// Copies the first max_depth frames of raw[0, n) that are not ours into pcs; returns their count and, in *own,
// how many of raw's frames are ours. Every frame of this library goes: the recorder and hook frames above the
// caller, and the runtime hook's frame in the middle of a stack (user code -> our cudaMalloc -> the real
// cudaMalloc -> our driver hook).
int KeepProgramFrames(void* const* raw, int n, uintptr_t* pcs, int max_depth, int* own_frames) {
  const AddressRange& own = OwnModuleRange();
  int count = 0;
  *own_frames = 0;
  for (int i = 0; i < n; ++i) {
    const uintptr_t pc = reinterpret_cast<uintptr_t>(raw[i]);
    if (own.Contains(pc)) {
      ++*own_frames;
    } else if (count < max_depth) {
      pcs[count++] = pc;
    }
  }
  return count;
}

// A stack deeper than max_depth.
__attribute__((noinline)) int CaptureDeepStack(uintptr_t* pcs, int max_depth, uint32_t* dropped) {
  void* raw[kDeepFrames];
  const int n = unw_backtrace(raw, kDeepFrames);
  if (n > 0 && n < kDeepFrames) return KeepEnds(raw, n, pcs, max_depth, dropped);
  return WalkDeepStack(pcs, max_depth, dropped);
}

// The unwind itself (CaptureStack without the memo).
__attribute__((noinline)) int UnwindStack(uintptr_t* pcs, int max_depth, bool* truncated, uint32_t* dropped,
                                          bool keep_outermost) {
  void* raw[kMaxStackDepth + kMaxOwnFrames + 1];
  const int full = max_depth + kMaxOwnFrames + 1;
  const int margin = g_own_frames_seen.load(std::memory_order_relaxed);
  int want = margin < kMaxOwnFrames ? max_depth + margin + 1 : full;
  int n = unw_backtrace(raw, want);
  if (n <= 0) return -1;
  int own_frames = 0;
  int count = KeepProgramFrames(raw, n, pcs, max_depth, &own_frames);
  if (n == want && count < max_depth && want < full) {
    // More of our frames than the margin allowed for: this stack again with the full margin.
    want = full;
    n = unw_backtrace(raw, want);
    if (n <= 0) return -1;
    count = KeepProgramFrames(raw, n, pcs, max_depth, &own_frames);
  }
  if (own_frames > margin) NoteOwnFrames(own_frames);
  if ((count == max_depth || n == want) && !keep_outermost) {
    *truncated = true;
    return count;
  }
  if (count == max_depth || n == want) {
    const int deep = CaptureDeepStack(pcs, max_depth, dropped);
    if (deep < 0) {  // keep what the fast path had: the innermost frames
      *truncated = true;
      return count;
    }
    *truncated = *dropped > 0;
    return deep;
  }
  return count;
}

bool SameStack(const uintptr_t* a, int a_count, bool a_truncated, const uintptr_t* b, int b_count,
               bool b_truncated) {
  if (a_count != b_count || a_truncated != b_truncated) return false;
  for (int i = 0; i < a_count; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace

int CaptureStack(uintptr_t* pcs, int max_depth, bool* truncated, uint32_t* dropped, bool keep_outermost,
                 uint64_t** memo_note) {
  *truncated = false;
  *dropped = 0;
  uint64_t* note = nullptr;
  if (memo_note != nullptr) *memo_note = nullptr;
  if (max_depth <= 0) return 0;
  // Where this call lies on the thread's stack: the same place and the same frames above it make the same stack.
  volatile char place_marker = 0;
  const uintptr_t place = reinterpret_cast<uintptr_t>(&place_marker);
  bool verify = false;
  const int remembered = UnwindMemoLookup(place, max_depth, keep_outermost, pcs, truncated, dropped, &verify, &note);
  if (remembered >= 0) {
    if (memo_note != nullptr) *memo_note = note;
    if (!verify) return remembered;
    uintptr_t unwound[kMaxStackDepth];
    bool unwound_truncated = false;
    uint32_t unwound_dropped = 0;
    const int count = UnwindStack(unwound, max_depth, &unwound_truncated, &unwound_dropped, keep_outermost);
    if (count >= 0 && SameStack(pcs, remembered, *truncated, unwound, count, unwound_truncated)) return remembered;
    UnwindMemoMismatch();
    if (memo_note != nullptr) *memo_note = nullptr;  // these frames are the unwinder's, not the entry's
    if (count > 0) memcpy(pcs, unwound, sizeof(uintptr_t) * static_cast<size_t>(count));
    *truncated = unwound_truncated;
    *dropped = unwound_dropped;
    return count;
  }
  const int count = UnwindStack(pcs, max_depth, truncated, dropped, keep_outermost);
  UnwindMemoLearn(place, max_depth, keep_outermost, pcs, count, *truncated, *dropped);
  return count;
}

}  // namespace cumemtrace::preload
