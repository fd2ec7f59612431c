#include "analyzer/model/torch/allocator_replay.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace cumemtrace::analyzer {

std::string ReplayUnsupported(const AllocatorConfig& config) {
  std::string why;
  auto add = [&](absl::string_view what) { absl::StrAppend(&why, why.empty() ? "" : ", ", what); };
  if (config.expandable_segments) add("expandable_segments:True");
  if (config.garbage_collection_threshold > 0) add("garbage_collection_threshold");
  if (config.cuda_malloc_async) add("backend:cudaMallocAsync");
  for (const std::string& setting : config.unmodelled) add(setting);
  return why;
}

CachingAllocatorReplay::Served CachingAllocatorReplay::Malloc(uint64_t requested, uint64_t stream) {
  const uint64_t rounded = TorchRoundSize(requested, config_);
  const bool small = TorchIsSmall(rounded);
  const uint64_t segment_size = TorchSegmentSizeFor(rounded);
  Served served;
  uint64_t address = 0;
  bool found = TakeFreeBlock(small, stream, rounded, &address) || NewSegment(small, stream, segment_size, &address);
  if (!found) {
    // The driver refused: release cache and retry, as the allocator does before it gives up.
    uint64_t released = 0;
    if (ReleaseOversize(small, stream, rounded, &released)) {
      served.released_bytes += released;
      found = NewSegment(small, stream, segment_size, &address);
    }
    if (!found) {
      served.released_bytes += ReleaseCachedSegments();
      found = NewSegment(small, stream, segment_size, &address);
    }
    if (!found) return served;
    served.recovered = true;
  }
  Block& block = blocks_[address];
  if (TorchShouldSplit(block.size, rounded, small, config_)) {
    // The rest stays cached. Its neighbour after it cannot be a free block (that would have merged with this one).
    Block rest = block;
    rest.size = block.size - rounded;
    block.size = rounded;
    blocks_[address + rounded] = rest;
    PoolOf(small).insert({rest.stream, rest.size, address + rounded});
  }
  Block& b = blocks_[address];
  b.allocated = true;
  b.requested = requested;
  allocated_ += b.size;
  requested_ += requested;
  allocated_peak_ = std::max(allocated_peak_, allocated_);
  served.ok = true;
  served.address = address;
  served.block_size = b.size;
  return served;
}

bool CachingAllocatorReplay::TakeFreeBlock(bool small, uint64_t stream, uint64_t rounded, uint64_t* address) {
  std::set<PoolKey>& pool = PoolOf(small);
  auto it = pool.lower_bound({stream, rounded, 0});
  if (it == pool.end() || std::get<0>(*it) != stream) return false;
  const uint64_t size = std::get<1>(*it);
  // An oversize block is kept for oversize requests, and those take one only if it is not much larger.
  if (rounded < config_.max_split_size && size >= config_.max_split_size) return false;
  if (rounded >= config_.max_split_size && size >= rounded + config_.max_non_split_rounding) return false;
  *address = std::get<2>(*it);
  pool.erase(it);
  return true;
}

bool CachingAllocatorReplay::NewSegment(bool small, uint64_t stream, uint64_t size, uint64_t* address) {
  if (!driver_->Malloc(size, reserved_, address)) return false;
  segments_[*address] = Segment{size, stream, small};
  blocks_[*address] = Block{size, stream, *address, 0, small, false};
  reserved_ += size;
  reserved_peak_ = std::max(reserved_peak_, reserved_);
  return true;
}

bool CachingAllocatorReplay::ReleaseOversize(bool small, uint64_t stream, uint64_t rounded, uint64_t* released) {
  *released = 0;
  if (config_.max_split_size == std::numeric_limits<uint64_t>::max()) return false;
  std::set<PoolKey>& pool = PoolOf(small);
  const uint64_t wanted = std::max(rounded, config_.max_split_size);
  auto it = pool.lower_bound({stream, wanted, 0});
  if (it != pool.end() && std::get<0>(*it) == stream) {
    *released = std::get<1>(*it);
    ReleaseSegment(std::get<2>(*it));
    return true;
  }
  // No single block is large enough: release oversize blocks of this stream, the largest first, until enough.
  // Oversize blocks are never split, so each is a whole segment.
  if (it == pool.begin()) return false;
  --it;
  while (*released < wanted && std::get<1>(*it) >= config_.max_split_size && std::get<0>(*it) == stream) {
    const auto current = it;
    const bool first = current == pool.begin();
    if (!first) --it;
    *released += std::get<1>(*current);
    ReleaseSegment(std::get<2>(*current));
    if (first) break;
  }
  return *released >= wanted;
}

uint64_t CachingAllocatorReplay::ReleaseCachedSegments() {
  uint64_t released = 0;
  // The large pool first, each in its own order (stream, size, address).
  for (bool small : {false, true}) {
    std::vector<uint64_t> whole;
    for (const PoolKey& key : PoolOf(small)) {
      const uint64_t address = std::get<2>(key);
      if (IsWholeSegment(address, blocks_.at(address))) whole.push_back(address);
    }
    for (uint64_t address : whole) {
      released += blocks_.at(address).size;
      ReleaseSegment(address);
    }
  }
  return released;
}

void CachingAllocatorReplay::ReleaseSegment(uint64_t address) {
  const Block& b = blocks_.at(address);
  PoolOf(b.small).erase({b.stream, b.size, address});
  const uint64_t size = b.size;
  blocks_.erase(address);
  segments_.erase(address);
  reserved_ -= size;
  driver_->Free(address, size);
}

bool CachingAllocatorReplay::IsWholeSegment(uint64_t address, const Block& b) const {
  auto s = segments_.find(address);
  return s != segments_.end() && s->second.size == b.size;
}

bool CachingAllocatorReplay::Free(uint64_t address) {
  auto it = blocks_.find(address);
  if (it == blocks_.end() || !it->second.allocated) return false;
  Block& b = it->second;
  allocated_ -= b.size;
  requested_ -= b.requested;
  b.allocated = false;
  b.requested = 0;
  InsertFree(address);
  return true;
}

void CachingAllocatorReplay::InsertFree(uint64_t address) {
  auto it = blocks_.find(address);
  std::set<PoolKey>& pool = PoolOf(it->second.small);
  // Merge with a free neighbour of the same segment on each side.
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (!prev->second.allocated && prev->second.segment == it->second.segment) {
      pool.erase({prev->second.stream, prev->second.size, prev->first});
      prev->second.size += it->second.size;
      blocks_.erase(it);
      it = prev;
    }
  }
  auto next = std::next(it);
  if (next != blocks_.end() && !next->second.allocated && next->second.segment == it->second.segment) {
    pool.erase({next->second.stream, next->second.size, next->first});
    it->second.size += next->second.size;
    blocks_.erase(next);
  }
  pool.insert({it->second.stream, it->second.size, it->first});
}

uint64_t CachingAllocatorReplay::largest_free_block() const {
  uint64_t largest = 0;
  for (const std::set<PoolKey>* pool : {&small_pool_, &large_pool_}) {
    for (const PoolKey& key : *pool) largest = std::max(largest, std::get<1>(key));
  }
  return largest;
}

}  // namespace cumemtrace::analyzer
