// PyTorch's caching-allocator rules that decide how big a block really is, read from PYTORCH_CUDA_ALLOC_CONF (as
// the preload recorded it in AllocatorAttach.config). The trace tracker reports the bytes a tensor asked for; the
// allocator hands out more (sizes are rounded, and a remainder too small to split stays with the block). These
// rules let the allocator layer (allocator_layer.h) reconstruct each block's real extent, so that its allocated
// bytes equal memory_stats()'s allocated_bytes. They restate the documented behaviour of c10/cuda's
// CUDACachingAllocator (round_size, should_split, get_allocation_size); nothing here is PyTorch's code.
//
// A setting that changes extents and is not modelled here is listed in `unmodelled`: reports then call the
// reconstructed extents an estimate. Must never guess silently.
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_RULES_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_RULES_H_

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace cumemtrace::analyzer {

inline constexpr uint64_t kTorchMinBlock = 512;               // every size is rounded to a multiple of this
inline constexpr uint64_t kTorchSmallSize = uint64_t{1} << 20;    // largest small-pool request: 1 MiB
inline constexpr uint64_t kTorchSmallBuffer = uint64_t{2} << 20;  // small pool segments: 2 MiB
inline constexpr uint64_t kTorchLargeBuffer = uint64_t{20} << 20;  // 1..10 MiB requests take 20 MiB segments
inline constexpr uint64_t kTorchMinLargeAlloc = uint64_t{10} << 20;
inline constexpr uint64_t kTorchRoundLarge = uint64_t{2} << 20;
inline constexpr int kTorchRoundupIntervals = 16;  // roundup_power2_divisions per power of two from 1 MiB

struct AllocatorConfig {
  std::string text;  // as recorded ("" = every default)
  bool expandable_segments = false;
  uint64_t max_split_size = std::numeric_limits<uint64_t>::max();  // max_split_size_mb, in bytes
  // Divisions per power-of-two interval: [0] for sizes below 2 MiB, [i] for [2^i MiB, 2^(i+1) MiB), the last for
  // everything above. 0 = plain 512-byte rounding.
  std::array<uint64_t, kTorchRoundupIntervals> roundup_divisions{};
  bool roundup_list = false;  // given as a [size:divisions,...] list (modelled, but less tested)
  // Settings present that change block extents in ways not modelled (or that this tool does not know): with any,
  // extents are estimates. Settings known to leave extents alone (garbage_collection_threshold,
  // release_lock_on_cudamalloc, pinned_*) are accepted silently.
  std::vector<std::string> unmodelled;
  bool cuda_malloc_async = false;  // backend:cudaMallocAsync (no caching allocator: the tracker never attaches)
  // Settings that change which block serves a request or when cache is released, not a block's extent: the
  // allocator replay (allocator_replay.h) needs them.
  double garbage_collection_threshold = 0;  // 0 = off
  // per_process_memory_fraction (PyTorch's setting of the per-process cap, as set_per_process_memory_fraction()
  // sets it from Python, which the trace cannot see): 0 = not given.
  double per_process_memory_fraction = 0;
  uint64_t max_non_split_rounding = kTorchLargeBuffer;  // max_non_split_rounding_mb, in bytes
};

// The per-process cap of a card of `card_bytes` under `config`'s per_process_memory_fraction (0: none, as PyTorch
// has none at a fraction of 1).
uint64_t TorchFractionCap(const AllocatorConfig& config, uint64_t card_bytes);

// Parses "key:value,key:value" as PyTorch does (whitespace ignored, a list value in brackets).
AllocatorConfig ParseAllocatorConfig(absl::string_view text);

// round_size(): the size the allocator looks for, from the bytes requested.
uint64_t TorchRoundSize(uint64_t requested, const AllocatorConfig& config);
// Small pool (<= 1 MiB after rounding) or large.
inline bool TorchIsSmall(uint64_t rounded) { return rounded <= kTorchSmallSize; }
// should_split(): whether a free block of `block_size` serving `rounded` bytes is split, or handed out whole.
bool TorchShouldSplit(uint64_t block_size, uint64_t rounded, bool small_pool, const AllocatorConfig& config);
// get_allocation_size(): the segment cudaMalloc'ed for a `rounded` request that no cached block could serve.
uint64_t TorchSegmentSizeFor(uint64_t rounded);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_RULES_H_
