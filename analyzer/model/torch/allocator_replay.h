// A replay of PyTorch's CUDA caching allocator (c10/cuda's CUDACachingAllocator, native backend), restated from its
// documented behaviour, never its code: the same requests in the same order give the same decisions, so that a
// trace can be replayed under other settings ("what if") and the replay says whether the OOM goes away.
//
// What it restates, for one device: sizes rounded (allocator_rules.h, roundup_power2_divisions included); a small
// pool (requests up to 1 MiB) and a large one; a request served by the smallest cached block of its stream and pool
// that fits, the lowest address first among equal sizes, never an oversize block (>= max_split_size_mb) for a
// request below that size, nor one more than max_non_split_rounding_mb larger than a request above it; a block split
// when the rest is worth keeping; a freed block merged with free neighbours of its segment; a request no cached
// block serves gets new memory from the driver, and when the driver (or a per-process cap) refuses: the oversize
// cached blocks released to make room (only with max_split_size_mb), then every cached segment that is wholly free,
// retrying after each; then an OOM.
//
// New memory is a segment of its own (cudaMalloc: 2 MiB for the small pool, 20 MiB for requests under 10 MiB, else
// the request rounded to 2 MiB), or with expandable_segments:True pages mapped into one large reserved range per
// pool and stream (2 MiB pages for the small pool, 20 MiB for the large): the request lands at the first run of free
// address space that holds it (a free mapped block just before unmapped pages counts), the pages it lacks are
// mapped there, and releasing cache unmaps the whole pages inside free blocks instead of freeing segments.
//
// Under a per-process cap (a memory fraction) and garbage_collection_threshold, before new memory is asked for while
// reserved is above that share of the cap: sweeps over the large pool's cached blocks in the pool's order, each
// releasing every whole segment at least as old as the mean age of the unsplit blocks (age: the pool's searches
// for a free block since the block was cached), until as much as reserved exceeds the share was released. Without
// a cap the threshold does nothing (PyTorch applies it only under one).
//
// Not restated (ReplayUnsupported says which, and nothing is claimed under them): CUDA graph pools and MemPools,
// and requests on other devices (one replay per device).
//
// The driver is an interface: in a fidelity replay it answers as the recorded run's driver did and checks that
// every segment or mapping the replay asks for or releases is the one the recorded allocator did; in a what-if
// replay it is a capacity model (allocator_whatif.cc).
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_REPLAY_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_REPLAY_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "analyzer/model/torch/allocator_rules.h"

namespace cumemtrace::analyzer {

class ReplayDriver {
 public:
  virtual ~ReplayDriver() = default;
  // The per-process cap (a memory fraction): whether `reserved_now` + `alloc_size` stays within it. Asked before
  // any new memory; a refusal never reaches the driver.
  virtual bool CapAllows(uint64_t reserved_now, uint64_t alloc_size) = 0;
  // cudaMalloc of a segment of `size` bytes; false when the driver refuses it.
  virtual bool Malloc(uint64_t size, uint64_t reserved_now, uint64_t* address) = 0;
  // cudaFree of a segment.
  virtual void Free(uint64_t address, uint64_t size) = 0;
  // Expandable segments: the base of a new reserved range of `size` bytes (address space only; never fails), then
  // pages mapped at [address, address + size) (false when the driver refuses them), and pages unmapped.
  virtual uint64_t Reserve(uint64_t size) = 0;
  virtual bool Map(uint64_t address, uint64_t size, uint64_t reserved_now) = 0;
  virtual void Unmap(uint64_t address, uint64_t size) = 0;
};

// "" when `config` is one the replay restates; otherwise the settings it does not, for one line to the user.
std::string ReplayUnsupported(const AllocatorConfig& config);

class CachingAllocatorReplay {
 public:
  // `device_memory`: the card's memory, which sizes an expandable segment's reserved range (1.125 times it).
  CachingAllocatorReplay(const AllocatorConfig& config, ReplayDriver* driver, uint64_t device_memory)
      : config_(config), driver_(driver), device_memory_(device_memory) {}

  struct Served {
    bool ok = false;          // false: the allocator would raise an OOM
    uint64_t address = 0;     // of the block
    uint64_t block_size = 0;  // its extent
    bool recovered = false;   // new memory was refused first, and releasing cache let a retry succeed
    uint64_t released_bytes = 0;  // cache released while serving it
  };
  // The per-process cap that garbage_collection_threshold is a share of (0: none; then the threshold does nothing).
  // The cap itself is the driver's to enforce (ReplayDriver::CapAllows).
  void SetMemoryCap(uint64_t cap) { memory_cap_ = cap; }
  // A request of `requested` bytes on `stream`.
  Served Malloc(uint64_t requested, uint64_t stream);
  // The block at `address` returns to the cache (its free completed: every stream that used it is done).
  // False when no allocated block starts there.
  bool Free(uint64_t address);
  // torch.cuda.empty_cache(): every cached segment that is wholly free goes back to the driver, and the whole pages
  // of free blocks in expandable segments are unmapped. Returns the bytes released.
  uint64_t ReleaseCachedSegments();

  uint64_t reserved() const { return reserved_; }
  uint64_t allocated() const { return allocated_; }
  uint64_t reserved_peak() const { return reserved_peak_; }
  uint64_t allocated_peak() const { return allocated_peak_; }
  // The largest free block cached now.
  uint64_t largest_free_block() const;

 private:
  struct Block {
    uint64_t size = 0;
    uint64_t stream = 0;
    uint64_t segment = 0;  // address of the segment that holds it
    bool small = false;
    bool allocated = false;
    bool mapped = true;       // false: address space of an expandable segment with no memory behind it
    bool expandable = false;  // in an expandable segment
    uint64_t gc_base = 0;     // its pool's free-block searches when it was cached (garbage collection's age)
  };
  struct Segment {
    uint64_t size = 0;  // an expandable segment's: its whole reserved range
    uint64_t stream = 0;
    bool small = false;
    bool expandable = false;
  };
  // A pool orders its cached free (mapped) blocks as the allocator does: by stream, then size, then address; its
  // unmapped blocks by stream, then address.
  using PoolKey = std::tuple<uint64_t, uint64_t, uint64_t>;  // stream, size, address
  using UnmappedKey = std::pair<uint64_t, uint64_t>;         // stream, address
  std::set<PoolKey>& PoolOf(bool small) { return small ? small_pool_ : large_pool_; }
  std::set<UnmappedKey>& UnmappedOf(bool small) { return small ? small_unmapped_ : large_unmapped_; }
  uint64_t PageOf(bool small) const { return small ? kTorchSmallBuffer : kTorchLargeBuffer; }

  // Puts the free mapped block at `address` in its pool, its age starting now.
  void PoolInsert(uint64_t address);
  bool GcActive() const { return memory_cap_ != 0 && config_.garbage_collection_threshold > 0; }
  // garbage_collect_cached_blocks: see the file comment.
  void CollectGarbage();
  // get_free_block: the cached block that serves `rounded` on `stream`, taken out of its pool.
  bool TakeFreeBlock(bool small, uint64_t stream, uint64_t rounded, uint64_t* address);
  // alloc_block: new memory for `rounded` (segment size `segment_size`), as one free block out of the pool.
  bool NewMemory(bool small, uint64_t stream, uint64_t rounded, uint64_t segment_size, uint64_t* address);
  bool NewSegment(bool small, uint64_t stream, uint64_t size, uint64_t* address);
  bool NewExpandableMemory(bool small, uint64_t stream, uint64_t size, uint64_t* address);
  // find_expandable_block: where a run of free address space of `size` starts (a new segment if none).
  uint64_t FindExpandableRun(bool small, uint64_t stream, uint64_t size);
  bool HasFreeRun(uint64_t address, uint64_t size) const;
  // map_block: maps pages at the start of the unmapped block at `address` to hold `size`; merges; in the pool.
  bool MapBlock(uint64_t address, uint64_t size, uint64_t* merged);
  // unmap_block: unmaps the whole pages inside the free block at `address`.
  uint64_t UnmapBlock(uint64_t address);
  // release_available_cached_blocks (only with max_split_size_mb): oversize blocks of `stream`, largest first.
  bool ReleaseOversize(bool small, uint64_t stream, uint64_t rounded, uint64_t* released);
  // release_block: a wholly free cached segment back to the driver.
  void ReleaseSegment(uint64_t address);
  bool IsWholeSegment(uint64_t address, const Block& b) const;
  // The block before / after the one at `address` in the same segment, or blocks_.end().
  std::map<uint64_t, Block>::iterator Prev(std::map<uint64_t, Block>::iterator it);
  std::map<uint64_t, Block>::iterator Next(std::map<uint64_t, Block>::iterator it);
  std::map<uint64_t, Block>::const_iterator Next(std::map<uint64_t, Block>::const_iterator it) const;
  // Puts the free block at `address` in its pool (mapped) or unmapped set, merged with free neighbours of the same
  // kind (mapped with mapped, unmapped with unmapped). Returns the merged block's address.
  uint64_t InsertFree(uint64_t address);
  void Unlist(uint64_t address, const Block& b);  // out of its pool or unmapped set
  // An expandable block's size plus its next block's when that one is unmapped (get_free_block's tie-break).
  uint64_t ExpandableSize(uint64_t address) const;
  void AddReserved(uint64_t bytes);

  AllocatorConfig config_;
  ReplayDriver* driver_;
  uint64_t device_memory_;
  std::map<uint64_t, Block> blocks_;      // every block, by address; a segment's blocks tile it
  std::map<uint64_t, Segment> segments_;  // by address
  std::set<PoolKey> small_pool_, large_pool_;
  std::set<UnmappedKey> small_unmapped_, large_unmapped_;
  uint64_t reserved_ = 0, allocated_ = 0;
  uint64_t reserved_peak_ = 0, allocated_peak_ = 0;
  uint64_t memory_cap_ = 0;
  uint64_t gc_searches_[2] = {0, 0};  // free-block searches per pool (large, small) while garbage collection is on
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_ALLOCATOR_REPLAY_H_
