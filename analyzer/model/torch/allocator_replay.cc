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
  bool found = TakeFreeBlock(small, stream, rounded, &address);
  if (!found) {
    if (GcActive()) CollectGarbage();
    found = NewMemory(small, stream, rounded, segment_size, &address);
  }
  if (!found) {
    // New memory was refused: release cache and retry, as the allocator does before it gives up.
    uint64_t released = 0;
    if (ReleaseOversize(small, stream, rounded, &released)) {
      served.released_bytes += released;
      found = NewMemory(small, stream, rounded, segment_size, &address);
    }
    if (!found) {
      served.released_bytes += ReleaseCachedSegments();
      found = NewMemory(small, stream, rounded, segment_size, &address);
    }
    if (!found) return served;
    served.recovered = true;
  }
  Block& block = blocks_[address];
  if (TorchShouldSplit(block.size, rounded, small, config_)) {
    // The rest stays cached. Its neighbour after it cannot be a free mapped block (that would have merged with
    // this one); an unmapped one stays apart.
    Block rest = block;
    rest.size = block.size - rounded;
    block.size = rounded;
    blocks_[address + rounded] = rest;
    PoolInsert(address + rounded);
  }
  Block& b = blocks_[address];
  b.allocated = true;
  allocated_ += b.size;
  allocated_peak_ = std::max(allocated_peak_, allocated_);
  served.ok = true;
  served.address = address;
  served.block_size = b.size;
  return served;
}

uint64_t CachingAllocatorReplay::ExpandableSize(uint64_t address) const {
  auto it = blocks_.find(address);
  uint64_t size = it->second.size;
  auto next = Next(std::map<uint64_t, Block>::const_iterator(it));
  if (next != blocks_.end() && !next->second.mapped) size += next->second.size;
  return size;
}

void CachingAllocatorReplay::PoolInsert(uint64_t address) {
  Block& b = blocks_.at(address);
  b.gc_base = gc_searches_[b.small ? 1 : 0];
  PoolOf(b.small).insert({b.stream, b.size, address});
}

void CachingAllocatorReplay::CollectGarbage() {
  const auto threshold = static_cast<uint64_t>(config_.garbage_collection_threshold *
                                               static_cast<double>(memory_cap_));
  if (reserved_ <= threshold) return;
  const uint64_t target = reserved_ - threshold;
  const uint64_t searches = gc_searches_[0];
  // The mean age is over every cached block that is not split (an expandable segment's too); only those that are
  // whole segments of their own are released.
  auto unsplit = [&](const PoolKey& key) {
    auto it = blocks_.find(std::get<2>(key));
    return Prev(it) == blocks_.end() && Next(it) == blocks_.end();
  };
  auto freeable = [&](const PoolKey& key) {
    const Block& b = blocks_.at(std::get<2>(key));
    return !b.expandable && IsWholeSegment(std::get<2>(key), b);
  };
  uint64_t total_age = 0, count = 0;
  for (const PoolKey& key : large_pool_) {
    if (unsplit(key)) {
      total_age += searches - blocks_.at(std::get<2>(key)).gc_base;
      ++count;
    }
  }
  uint64_t reclaimed = 0;
  bool freed = true;
  // A sweep releases every block at least as old as the mean age when it began, even past the target.
  while (reclaimed < target && freed && count > 0) {
    const double mean_age = static_cast<double>(total_age) / static_cast<double>(count);
    freed = false;
    for (auto it = large_pool_.begin(); it != large_pool_.end();) {
      const PoolKey key = *it++;
      if (!freeable(key)) continue;
      const uint64_t age = searches - blocks_.at(std::get<2>(key)).gc_base;
      if (static_cast<double>(age) < mean_age) continue;
      freed = true;
      reclaimed += std::get<1>(key);
      total_age -= age;
      --count;
      ReleaseSegment(std::get<2>(key));
    }
  }
}

bool CachingAllocatorReplay::TakeFreeBlock(bool small, uint64_t stream, uint64_t rounded, uint64_t* address) {
  if (GcActive()) ++gc_searches_[small ? 1 : 0];
  std::set<PoolKey>& pool = PoolOf(small);
  auto it = pool.lower_bound({stream, rounded, 0});
  if (it == pool.end() || std::get<0>(*it) != stream) return false;
  if (config_.expandable_segments) {
    // Among expandable blocks that fit, prefer one whose free address space behind it is smaller: the end of a
    // segment, followed by unmapped pages, is kept for requests that need to grow into them.
    while (blocks_.at(std::get<2>(*it)).expandable) {
      auto next = std::next(it);
      if (next == pool.end() || std::get<0>(*next) != stream) break;
      if (ExpandableSize(std::get<2>(*next)) >= ExpandableSize(std::get<2>(*it))) break;
      it = next;
    }
  }
  const uint64_t size = std::get<1>(*it);
  // An oversize block is kept for oversize requests, and those take one only if it is not much larger.
  if (rounded < config_.max_split_size && size >= config_.max_split_size) return false;
  if (rounded >= config_.max_split_size && size >= rounded + config_.max_non_split_rounding) return false;
  *address = std::get<2>(*it);
  pool.erase(it);
  return true;
}

bool CachingAllocatorReplay::NewMemory(bool small, uint64_t stream, uint64_t rounded, uint64_t segment_size,
                                       uint64_t* address) {
  // A per-process cap is checked against the segment size even when pages are mapped instead.
  if (!driver_->CapAllows(reserved_, segment_size)) return false;
  return config_.expandable_segments ? NewExpandableMemory(small, stream, rounded, address)
                                     : NewSegment(small, stream, segment_size, address);
}

bool CachingAllocatorReplay::NewSegment(bool small, uint64_t stream, uint64_t size, uint64_t* address) {
  if (!driver_->Malloc(size, reserved_, address)) return false;
  segments_[*address] = Segment{size, stream, small, false};
  blocks_[*address] = Block{size, stream, *address, small, false, true, false};
  AddReserved(size);
  return true;
}

bool CachingAllocatorReplay::NewExpandableMemory(bool small, uint64_t stream, uint64_t size, uint64_t* address) {
  uint64_t run = FindExpandableRun(small, stream, size);
  if (!blocks_.at(run).mapped && !MapBlock(run, std::min(blocks_.at(run).size, size), &run)) return false;
  // Map the pages after it until the run holds the request (a failure keeps what was mapped, as free cache).
  while (blocks_.at(run).size < size) {
    auto next = Next(blocks_.find(run));
    if (next == blocks_.end() || next->second.mapped || next->second.allocated) return false;
    const uint64_t missing = size - blocks_.at(run).size;
    if (!MapBlock(next->first, std::min(missing, next->second.size), &run)) return false;
  }
  Unlist(run, blocks_.at(run));
  *address = run;
  return true;
}

uint64_t CachingAllocatorReplay::FindExpandableRun(bool small, uint64_t stream, uint64_t size) {
  std::set<UnmappedKey>& unmapped = UnmappedOf(small);
  for (auto it = unmapped.lower_bound({stream, 0}); it != unmapped.end() && it->first == stream; ++it) {
    uint64_t start = it->second;
    // A free mapped block right before the unmapped pages is used first.
    auto prev = Prev(blocks_.find(start));
    if (prev != blocks_.end() && !prev->second.allocated && prev->second.mapped) start = prev->first;
    if (HasFreeRun(start, size)) return start;
  }
  // A new segment: a range of 1.125 times the card's memory, in pages, with nothing mapped yet.
  const uint64_t page = PageOf(small);
  const uint64_t memory = device_memory_ != 0 ? device_memory_ : uint64_t{80} << 30;
  const uint64_t range = page * ((memory + memory / 8 + page - 1) / page);
  const uint64_t base = driver_->Reserve(range);
  segments_[base] = Segment{range, stream, small, true};
  blocks_[base] = Block{range, stream, base, small, false, false, true};
  unmapped.insert({stream, base});
  return base;
}

bool CachingAllocatorReplay::HasFreeRun(uint64_t address, uint64_t size) const {
  uint64_t bytes = 0;
  for (auto it = blocks_.find(address); bytes < size && it != blocks_.end() && !it->second.allocated;
       it = Next(it)) {
    bytes += it->second.size;
  }
  return bytes >= size;
}

bool CachingAllocatorReplay::MapBlock(uint64_t address, uint64_t size, uint64_t* merged) {
  Block& b = blocks_.at(address);
  const uint64_t page = PageOf(b.small);
  // Unmapped blocks start on a page boundary (from the segment's base) and are whole pages: so is what is mapped.
  const uint64_t mapped = (size + page - 1) / page * page;
  if (!driver_->Map(address, mapped, reserved_)) return false;
  UnmappedOf(b.small).erase({b.stream, address});
  if (mapped < b.size) {
    Block rest = b;
    rest.size = b.size - mapped;
    blocks_[address + mapped] = rest;
    UnmappedOf(rest.small).insert({rest.stream, address + mapped});
  }
  Block& now = blocks_.at(address);
  now.size = mapped;
  now.mapped = true;
  AddReserved(mapped);
  *merged = InsertFree(address);
  return true;
}

uint64_t CachingAllocatorReplay::UnmapBlock(uint64_t address) {
  const Block b = blocks_.at(address);
  const uint64_t page = PageOf(b.small);
  // Pages are counted from the segment's base.
  const uint64_t base = b.segment;
  const uint64_t start = base + (address - base + page - 1) / page * page;
  const uint64_t end = base + (address + b.size - base) / page * page;
  if (end <= start) return 0;
  driver_->Unmap(start, end - start);
  Unlist(address, b);
  blocks_.erase(address);
  // What lies outside whole pages stays mapped, as free blocks of their own.
  if (start > address) {
    Block before = b;
    before.size = start - address;
    blocks_[address] = before;
    PoolInsert(address);
  }
  if (address + b.size > end) {
    Block after = b;
    after.size = address + b.size - end;
    blocks_[end] = after;
    PoolInsert(end);
  }
  Block middle = b;
  middle.size = end - start;
  middle.mapped = false;
  blocks_[start] = middle;
  reserved_ -= end - start;
  const uint64_t unmapped = InsertFree(start);
  // A segment with nothing mapped left is given back whole.
  auto it = blocks_.find(unmapped);
  if (Prev(it) == blocks_.end() && Next(it) == blocks_.end()) {
    UnmappedOf(b.small).erase({b.stream, unmapped});
    segments_.erase(it->second.segment);
    blocks_.erase(it);
  }
  return end - start;
}

bool CachingAllocatorReplay::ReleaseOversize(bool small, uint64_t stream, uint64_t rounded, uint64_t* released) {
  *released = 0;
  if (config_.max_split_size == std::numeric_limits<uint64_t>::max()) return false;
  std::set<PoolKey>& pool = PoolOf(small);
  const uint64_t wanted = std::max(rounded, config_.max_split_size);
  auto it = pool.lower_bound({stream, wanted, 0});
  if (it != pool.end() && std::get<0>(*it) == stream && !blocks_.at(std::get<2>(*it)).expandable) {
    *released = std::get<1>(*it);
    ReleaseSegment(std::get<2>(*it));
    return true;
  }
  // No single block is large enough: release oversize blocks of this stream, the largest first, until enough.
  // Oversize blocks are never split, so each is a whole segment; blocks of expandable segments are passed over.
  if (it == pool.begin()) return false;
  --it;
  while (*released < wanted && std::get<1>(*it) >= config_.max_split_size && std::get<0>(*it) == stream) {
    const auto current = it;
    const bool first = current == pool.begin();
    if (!first) --it;
    if (!blocks_.at(std::get<2>(*current)).expandable) {
      *released += std::get<1>(*current);
      ReleaseSegment(std::get<2>(*current));
    }
    if (first) break;
  }
  return *released >= wanted;
}

uint64_t CachingAllocatorReplay::ReleaseCachedSegments() {
  uint64_t released = 0;
  // The large pool first, each in its own order (stream, size, address): wholly free segments are freed, and the
  // whole pages of free blocks in expandable segments unmapped.
  for (bool small : {false, true}) {
    std::vector<uint64_t> whole, expandable;
    for (const PoolKey& key : PoolOf(small)) {
      const uint64_t address = std::get<2>(key);
      const Block& b = blocks_.at(address);
      if (b.expandable) {
        expandable.push_back(address);
      } else if (IsWholeSegment(address, b)) {
        whole.push_back(address);
      }
    }
    for (uint64_t address : whole) {
      released += blocks_.at(address).size;
      ReleaseSegment(address);
    }
    for (uint64_t address : expandable) released += UnmapBlock(address);
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
  return s != segments_.end() && !s->second.expandable && s->second.size == b.size;
}

std::map<uint64_t, CachingAllocatorReplay::Block>::iterator CachingAllocatorReplay::Prev(
    std::map<uint64_t, Block>::iterator it) {
  if (it == blocks_.begin()) return blocks_.end();
  auto prev = std::prev(it);
  return prev->second.segment == it->second.segment ? prev : blocks_.end();
}

std::map<uint64_t, CachingAllocatorReplay::Block>::iterator CachingAllocatorReplay::Next(
    std::map<uint64_t, Block>::iterator it) {
  auto next = std::next(it);
  return next != blocks_.end() && next->second.segment == it->second.segment ? next : blocks_.end();
}

std::map<uint64_t, CachingAllocatorReplay::Block>::const_iterator CachingAllocatorReplay::Next(
    std::map<uint64_t, Block>::const_iterator it) const {
  auto next = std::next(it);
  return next != blocks_.end() && next->second.segment == it->second.segment ? next : blocks_.end();
}

void CachingAllocatorReplay::Unlist(uint64_t address, const Block& b) {
  if (b.mapped) {
    PoolOf(b.small).erase({b.stream, b.size, address});
  } else {
    UnmappedOf(b.small).erase({b.stream, address});
  }
}

bool CachingAllocatorReplay::Free(uint64_t address) {
  auto it = blocks_.find(address);
  if (it == blocks_.end() || !it->second.allocated) return false;
  Block& b = it->second;
  allocated_ -= b.size;
  b.allocated = false;
  InsertFree(address);
  return true;
}

uint64_t CachingAllocatorReplay::InsertFree(uint64_t address) {
  auto it = blocks_.find(address);
  const bool mapped = it->second.mapped;
  auto mergeable = [&](std::map<uint64_t, Block>::iterator other) {
    return other != blocks_.end() && !other->second.allocated && other->second.mapped == mapped;
  };
  if (auto prev = Prev(it); mergeable(prev)) {
    Unlist(prev->first, prev->second);
    prev->second.size += it->second.size;
    blocks_.erase(it);
    it = prev;
  }
  if (auto next = Next(it); mergeable(next)) {
    Unlist(next->first, next->second);
    it->second.size += next->second.size;
    blocks_.erase(next);
  }
  if (mapped) {
    PoolInsert(it->first);
  } else {
    UnmappedOf(it->second.small).insert({it->second.stream, it->first});
  }
  return it->first;
}

void CachingAllocatorReplay::AddReserved(uint64_t bytes) {
  reserved_ += bytes;
  reserved_peak_ = std::max(reserved_peak_, reserved_);
}

uint64_t CachingAllocatorReplay::largest_free_block() const {
  uint64_t largest = 0;
  for (const std::set<PoolKey>* pool : {&small_pool_, &large_pool_}) {
    for (const PoolKey& key : *pool) largest = std::max(largest, std::get<1>(key));
  }
  return largest;
}

}  // namespace cumemtrace::analyzer
