// A replay of PyTorch's CUDA caching allocator (c10/cuda's CUDACachingAllocator, native backend), restated from its
// documented behaviour, never its code: the same requests in the same order give the same decisions, so that a
// trace can be replayed under other settings ("what if") and the replay says whether the OOM goes away.
//
// What it restates, for one device: sizes rounded (allocator_rules.h, roundup_power2_divisions included); a small
// pool (requests up to 1 MiB, 2 MiB segments) and a large one; a request served by the smallest cached block of its
// stream and pool that fits, the lowest address first among equal sizes, never an oversize block (>=
// max_split_size_mb) for a request below that size, nor one more than max_non_split_rounding_mb larger than a
// request above it; a block split when the rest is worth keeping; a freed block merged with free neighbours of its
// segment; a request no cached block serves gets a new segment from the driver, and when the driver refuses: the
// oversize cached blocks released to make room (only with max_split_size_mb), then every cached segment that is
// wholly free, retrying after each; then an OOM.
//
// Not restated (Supports() says which, and nothing is claimed under them): expandable segments,
// garbage_collection_threshold, CUDA graph pools, and requests on other devices (one replay per device).
//
// The driver is an interface: in a fidelity replay it answers as the recorded run's driver did and checks that
// every segment the replay asks for or releases is the one the recorded allocator did; in a what-if replay it is a
// capacity model (allocator_whatif.h).
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_REPLAY_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_REPLAY_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "analyzer/model/torch/allocator_rules.h"

namespace cumemtrace::analyzer {

class ReplayDriver {
 public:
  virtual ~ReplayDriver() = default;
  // cudaMalloc of a segment of `size` bytes; false when the driver (or a memory cap) refuses it.
  virtual bool Malloc(uint64_t size, uint64_t reserved_now, uint64_t* address) = 0;
  // cudaFree of a segment.
  virtual void Free(uint64_t address, uint64_t size) = 0;
};

// "" when `config` is one the replay restates; otherwise the settings it does not, for one line to the user.
std::string ReplayUnsupported(const AllocatorConfig& config);

class CachingAllocatorReplay {
 public:
  CachingAllocatorReplay(const AllocatorConfig& config, ReplayDriver* driver) : config_(config), driver_(driver) {}

  struct Served {
    bool ok = false;          // false: the allocator would raise an OOM
    uint64_t address = 0;     // of the block
    uint64_t block_size = 0;  // its extent
    bool recovered = false;   // a driver allocation failed first, and releasing cache let a retry succeed
    uint64_t released_bytes = 0;  // cache released while serving it
  };
  // A request of `requested` bytes on `stream`.
  Served Malloc(uint64_t requested, uint64_t stream);
  // The block at `address` returns to the cache (its free completed: every stream that used it is done).
  // False when no allocated block starts there.
  bool Free(uint64_t address);
  // torch.cuda.empty_cache(): every cached segment that is wholly free goes back to the driver.
  uint64_t ReleaseCachedSegments();

  uint64_t reserved() const { return reserved_; }
  uint64_t allocated() const { return allocated_; }
  uint64_t requested() const { return requested_; }
  uint64_t reserved_peak() const { return reserved_peak_; }
  uint64_t allocated_peak() const { return allocated_peak_; }
  uint64_t segments() const { return segments_.size(); }
  // Free bytes cached now, and the largest free block cached.
  uint64_t cached_free() const { return reserved_ - allocated_; }
  uint64_t largest_free_block() const;

 private:
  struct Block {
    uint64_t size = 0;
    uint64_t stream = 0;
    uint64_t segment = 0;  // address of the segment that holds it
    uint64_t requested = 0;
    bool small = false;
    bool allocated = false;
  };
  struct Segment {
    uint64_t size = 0;
    uint64_t stream = 0;
    bool small = false;
  };
  // A pool orders its cached free blocks as the allocator does: by stream, then size, then address.
  using PoolKey = std::tuple<uint64_t, uint64_t, uint64_t>;  // stream, size, address
  std::set<PoolKey>& PoolOf(bool small) { return small ? small_pool_ : large_pool_; }

  // get_free_block: the cached block that serves `rounded` on `stream`, taken out of its pool, or 0 when none.
  bool TakeFreeBlock(bool small, uint64_t stream, uint64_t rounded, uint64_t* address);
  // alloc_block: a new segment of `size` from the driver, as one free block (not in the pool).
  bool NewSegment(bool small, uint64_t stream, uint64_t size, uint64_t* address);
  // release_available_cached_blocks (only with max_split_size_mb): oversize blocks of `stream`, largest first.
  bool ReleaseOversize(bool small, uint64_t stream, uint64_t rounded, uint64_t* released);
  // release_block: a wholly free cached segment back to the driver.
  void ReleaseSegment(uint64_t address);
  bool IsWholeSegment(uint64_t address, const Block& b) const;
  void InsertFree(uint64_t address);

  AllocatorConfig config_;
  ReplayDriver* driver_;
  std::map<uint64_t, Block> blocks_;      // every block, by address; a segment's blocks tile it
  std::map<uint64_t, Segment> segments_;  // by address
  std::set<PoolKey> small_pool_, large_pool_;
  uint64_t reserved_ = 0, allocated_ = 0, requested_ = 0;
  uint64_t reserved_peak_ = 0, allocated_peak_ = 0;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_REPLAY_H_
