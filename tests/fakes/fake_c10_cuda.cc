// TEST DOUBLE: a fake libc10_cuda.so, PyTorch's CUDA allocator library as the preload's torch_tracker.cc meets it,
// for the CPU tests. It is never linked into anything but test programs.
//
// What it must share with the real one (torch 2.11, measured on the GPU machine) is exactly what the preload relies
// on: the same mangled names (namespaces c10::cuda::CUDACachingAllocator::{Native,CudaMallocAsync}, the TraceEntry
// in c10::CachingDeviceAllocator), the exported data symbol `allocator` (std::atomic<CUDAAllocator*>) in a library
// built with -fvisibility=hidden that keeps its .symtab, a virtual attachAllocatorTraceTracker taking a libstdc++
// std::function by value that NativeCachingAllocator copies into each device allocator, the TraceEntry head layout,
// device allocators created only at init(), and segments taken with the driver's cuMemAlloc (or cuMemAddressReserve
// + cuMemCreate + cuMemMap for expandable segments) from inside the allocator.
//
// Its own placement rules are deliberately simple (bump allocation inside segments): the tests compare the trace with
// the ledger this library writes of every trace entry it emits (FAKE_TORCH_LEDGER), not with PyTorch's rules.
//
// Controls (environment): FAKE_TORCH_LEDGER=path, FAKE_TORCH_COUNTS=path (only the number of entries of each action,
// written at exit: a line per entry would keep a long run in write(2)), FAKE_TORCH_BACKEND=async (the allocator object is
// CudaMallocAsyncAllocator, whose attach throws), FAKE_TORCH_EXPANDABLE=1, FAKE_TORCH_BAD_LAYOUT=1 (the first
// SEGMENT_ALLOC entry reports a wrong size, as an unknown layout would look).
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace c10 {
using DeviceIndex = int8_t;
struct GradMode {  // fake_c10.cc
  static bool is_enabled();
};
namespace CachingDeviceAllocator {
struct TraceEntry {
  enum Action { ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP,
                SNAPSHOT, OOM };
  Action action_;
  DeviceIndex device_;
  size_t addr_;
  std::shared_ptr<void> context_;
  void* stream_{};
  size_t size_;
  uint64_t mempool_[2]{};
  uint64_t time_{};
  std::string compile_context_;
  std::string user_metadata_;
};
}  // namespace CachingDeviceAllocator

namespace cuda::CUDACachingAllocator {
using CachingDeviceAllocator::TraceEntry;
using AllocatorTraceTracker = std::function<void(const TraceEntry&)>;

class CUDAAllocator {
 public:
  virtual ~CUDAAllocator();
  virtual void init(int device_count) = 0;
  virtual void* malloc(size_t size, int device) = 0;
  virtual void free(void* ptr) = 0;
  virtual void emptyCache() = 0;
  virtual void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) = 0;
};
CUDAAllocator::~CUDAAllocator() = default;

__attribute__((visibility("default"))) std::atomic<CUDAAllocator*> allocator;

namespace {

FILE* Ledger() {
  static FILE* ledger = [] {
    const char* path = getenv("FAKE_TORCH_LEDGER");
    return path != nullptr ? fopen(path, "a") : nullptr;
  }();
  return ledger;
}

const char* const kActionNames[] = {"alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
                                    "segment_map", "segment_unmap",  "snapshot",       "oom"};
constexpr size_t kActions = sizeof(kActionNames) / sizeof(kActionNames[0]);

// FAKE_TORCH_COUNTS: entries emitted per action, written as "action count" lines when the process exits.
std::atomic<uint64_t> entry_counts[kActions];
struct CountsAtExit {
  ~CountsAtExit() {
    const char* path = getenv("FAKE_TORCH_COUNTS");
    FILE* out = path != nullptr ? fopen(path, "w") : nullptr;
    if (out == nullptr) return;
    for (size_t i = 0; i < kActions; ++i) {
      fprintf(out, "%s %llu\n", kActionNames[i], static_cast<unsigned long long>(entry_counts[i].load()));
    }
    fclose(out);
  }
} counts_at_exit;

}  // namespace

namespace Native {

constexpr size_t kSmallSize = 1 << 20, kSmallBuffer = 2 << 20, kLargeBuffer = 20 << 20, kMinLargeAlloc = 10 << 20,
                 kRoundLarge = 2 << 20, kMinBlockSize = 512;
constexpr size_t kExpandableReserve = size_t{1} << 30;

struct Segment {
  CUdeviceptr base = 0;
  size_t size = 0;
  size_t used = 0;  // bump pointer
  int live = 0;     // blocks handed out and not freed
};

struct Block {
  CUdeviceptr ptr;
  size_t requested;
  Segment* segment;
  bool used_on_other_streams = false;
};

// Aligned: allocators of different devices used by different threads share no cache line.
class alignas(64) DeviceCachingAllocator {
 public:
  explicit DeviceCachingAllocator(int device) : device_(device) {}

  void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) {
    std::unique_lock<std::recursive_mutex> lock(mutex_);
    trace_trackers_.emplace_back(std::move(tracker));
  }

  void* malloc(size_t size) {
    std::unique_lock<std::recursive_mutex> lock(mutex_);
    size_t rounded = (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
    Segment* segment = nullptr;
    for (auto& s : segments_) {
      if (s->size - s->used >= rounded) {
        segment = s.get();
        break;
      }
    }
    if (segment == nullptr) segment = NewSegment(size, rounded);
    if (segment == nullptr) {
      size_t free_bytes = 0, total = 0;
      cuMemGetInfo(&free_bytes, &total);
      RecordTrace(TraceEntry::OOM, free_bytes, size);
      return nullptr;
    }
    Block block{segment->base + segment->used, size, segment};
    segment->used += rounded;
    ++segment->live;
    blocks_.push_back(block);
    RecordTrace(TraceEntry::ALLOC, block.ptr, size);
    return reinterpret_cast<void*>(block.ptr);
  }

  bool free(void* ptr) {
    std::unique_lock<std::recursive_mutex> lock(mutex_);
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (blocks_[i].ptr != reinterpret_cast<CUdeviceptr>(ptr)) continue;
      Block block = blocks_[i];
      blocks_.erase(blocks_.begin() + static_cast<long>(i));
      RecordTrace(TraceEntry::FREE_REQUESTED, block.ptr, block.requested);
      if (block.used_on_other_streams) {  // as PyTorch waits for the streams' events: completed later
        deferred_.push_back(block);
        return true;
      }
      Complete(block);
      return true;
    }
    return false;
  }

  // record_stream(): the block's free waits until fake_torch_process_events().
  bool recordStream(void* ptr) {
    std::unique_lock<std::recursive_mutex> lock(mutex_);
    for (Block& block : blocks_) {
      if (block.ptr != reinterpret_cast<CUdeviceptr>(ptr)) continue;
      block.used_on_other_streams = true;
      return true;
    }
    return false;
  }

  // PyTorch's process_events(): the frees whose streams are done complete now, on the calling thread.
  void processEvents() {
    std::unique_lock<std::recursive_mutex> lock(mutex_);
    for (const Block& block : deferred_) Complete(block);
    deferred_.clear();
  }

  void emptyCache() {
    std::unique_lock<std::recursive_mutex> lock(mutex_);
    for (size_t i = 0; i < segments_.size();) {
      Segment& s = *segments_[i];
      if (s.live != 0 || expandable_) {
        ++i;
        continue;
      }
      RecordTrace(TraceEntry::SEGMENT_FREE, s.base, s.size);
      cuMemFree(s.base);
      segments_.erase(segments_.begin() + static_cast<long>(i));
    }
  }

 private:
  void Complete(const Block& block) {
    if (--block.segment->live == 0) block.segment->used = 0;  // the whole segment is free again
    RecordTrace(TraceEntry::FREE_COMPLETED, block.ptr, block.requested);
  }

  Segment* NewSegment(size_t size, size_t rounded) {
    if (expandable_) return Grow(rounded);
    size_t segment_size = size <= kSmallSize      ? kSmallBuffer
                          : size < kMinLargeAlloc ? kLargeBuffer
                                                  : (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
    CUdeviceptr base = 0;
    if (cuMemAlloc(&base, segment_size) != CUDA_SUCCESS) return nullptr;
    auto segment = std::make_unique<Segment>();
    segment->base = base;
    segment->size = segment_size;
    size_t reported = segment_size;
    if (getenv("FAKE_TORCH_BAD_LAYOUT") != nullptr && !reported_bad_layout_) {
      reported_bad_layout_ = true;
      reported += 1;
    }
    RecordTrace(TraceEntry::SEGMENT_ALLOC, base, reported);
    segments_.push_back(std::move(segment));
    return segments_.back().get();
  }

  // Expandable segments: one address range per device, mapped 2 MiB at a time as it grows.
  Segment* Grow(size_t rounded) {
    if (segments_.empty()) {
      CUdeviceptr va = 0;
      if (cuMemAddressReserve(&va, kExpandableReserve, 0, 0, 0) != CUDA_SUCCESS) return nullptr;
      auto segment = std::make_unique<Segment>();
      segment->base = va;
      segments_.push_back(std::move(segment));
    }
    Segment* s = segments_.front().get();
    while (s->size - s->used < rounded) {
      if (s->size + kRoundLarge > kExpandableReserve) return nullptr;
      CUmemAllocationProp prop{};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = device_;
      CUmemGenericAllocationHandle handle = 0;
      if (cuMemCreate(&handle, kRoundLarge, &prop, 0) != CUDA_SUCCESS) return nullptr;
      if (cuMemMap(s->base + s->size, kRoundLarge, 0, handle, 0) != CUDA_SUCCESS) return nullptr;
      RecordTrace(TraceEntry::SEGMENT_MAP, s->base + s->size, kRoundLarge);
      s->size += kRoundLarge;
    }
    return s;
  }

  void RecordTrace(TraceEntry::Action action, size_t addr, size_t size) {
    TraceEntry te;
    te.action_ = action;
    te.device_ = static_cast<DeviceIndex>(device_);
    te.addr_ = addr;
    te.stream_ = nullptr;
    te.size_ = size;
    // Only when asked: a counter every thread adds to would make threads that share nothing else wait for each other.
    static const bool counting = getenv("FAKE_TORCH_COUNTS") != nullptr;
    if (counting) entry_counts[action].fetch_add(1, std::memory_order_relaxed);
    if (FILE* ledger = Ledger()) {
      // An ALLOC says autograd's grad mode on the allocating thread, as the preload should have read it.
      fprintf(ledger, "%s addr=0x%zx size=%zu device=%d grad=%d thread=%ld\n", kActionNames[action], addr, size,
              device_, action == TraceEntry::ALLOC ? static_cast<int>(GradMode::is_enabled()) : -1,
              static_cast<long>(syscall(SYS_gettid)));
      fflush(ledger);
    }
    for (const auto& tracker : trace_trackers_) tracker(te);
  }

  int device_;
  bool expandable_ = getenv("FAKE_TORCH_EXPANDABLE") != nullptr;
  bool reported_bad_layout_ = false;
  std::recursive_mutex mutex_;
  std::vector<AllocatorTraceTracker> trace_trackers_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::vector<Block> blocks_;
  std::vector<Block> deferred_;  // freed, their completion waiting for processEvents()
};

class NativeCachingAllocator : public CUDAAllocator {
 public:
  void init(int device_count) override {
    for (int d = static_cast<int>(device_allocator.size()); d < device_count; ++d) {
      device_allocator.push_back(std::make_unique<DeviceCachingAllocator>(d));
    }
  }
  void* malloc(size_t size, int device) override { return device_allocator.at(device)->malloc(size); }
  void free(void* ptr) override {
    for (auto& a : device_allocator) {
      if (a->free(ptr)) return;
    }
  }
  void emptyCache() override {
    for (auto& a : device_allocator) a->emptyCache();
  }
  void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) override {
    for (auto& a : device_allocator) a->attachAllocatorTraceTracker(tracker);
  }
  // Not virtual: the vtable stays as the preload expects it.
  void recordStream(void* ptr) {
    for (auto& a : device_allocator) {
      if (a->recordStream(ptr)) return;
    }
  }
  void processEvents() {
    for (auto& a : device_allocator) a->processEvents();
  }
  // Frees through the block's device allocator alone, as PyTorch finds it (free() asks each device's in turn, taking
  // every lock on the way: threads of different devices would wait for each other there).
  void freeOn(void* ptr, int device) { device_allocator.at(device)->free(ptr); }

  std::vector<std::unique_ptr<DeviceCachingAllocator>> device_allocator;
};

}  // namespace Native

namespace CudaMallocAsync {
// Every tensor its own stream-ordered allocation; its attach throws, as PyTorch's does.
class CudaMallocAsyncAllocator : public CUDAAllocator {
 public:
  void init(int) override {}
  void* malloc(size_t size, int) override {
    CUdeviceptr ptr = 0;
    return cuMemAllocAsync(&ptr, size, nullptr) == CUDA_SUCCESS ? reinterpret_cast<void*>(ptr) : nullptr;
  }
  void free(void* ptr) override { cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(ptr), nullptr); }
  void emptyCache() override {}
  void attachAllocatorTraceTracker(AllocatorTraceTracker) override {
    throw std::runtime_error("cudaMallocAsync does not yet support attachAllocatorTraceTracker");
  }
};
}  // namespace CudaMallocAsync

namespace {
Native::NativeCachingAllocator g_native;
CudaMallocAsync::CudaMallocAsyncAllocator g_async;

__attribute__((constructor)) void SelectBackend() {
  const char* backend = getenv("FAKE_TORCH_BACKEND");
  if (backend != nullptr && strcmp(backend, "async") == 0) {
    allocator.store(&g_async);
  } else {
    allocator.store(&g_native);
  }
}
}  // namespace

}  // namespace cuda::CUDACachingAllocator
}  // namespace c10

// The fake's controls for test programs (what torch.cuda would do).
namespace fake = c10::cuda::CUDACachingAllocator;
extern "C" __attribute__((visibility("default"))) void fake_torch_init(int device_count) {
  fake::allocator.load()->init(device_count);
}
extern "C" __attribute__((visibility("default"))) void* fake_torch_malloc(size_t size, int device) {
  return fake::allocator.load()->malloc(size, device);
}
extern "C" __attribute__((visibility("default"))) void fake_torch_free(void* ptr) { fake::allocator.load()->free(ptr); }
extern "C" __attribute__((visibility("default"))) void fake_torch_free_on(void* ptr, int device) {
  if (fake::allocator.load() == &fake::g_native) {
    fake::g_native.freeOn(ptr, device);
  } else {
    fake::allocator.load()->free(ptr);
  }
}
// tensor.record_stream(): the block's free completes only at fake_torch_process_events() (the native backend only).
extern "C" __attribute__((visibility("default"))) void fake_torch_record_stream(void* ptr) {
  fake::g_native.recordStream(ptr);
}
extern "C" __attribute__((visibility("default"))) void fake_torch_process_events() { fake::g_native.processEvents(); }
namespace {
// `frames` native frames between the caller and the allocator, as PyTorch's dispatcher puts 30 to 40 between a
// Python binding and the caching allocator (bench/torch_workload.py measures the tracker's cost at a given depth).
__attribute__((noinline)) void* MallocNested(size_t size, int device, int frames) {
  void* p = frames <= 0 ? fake::allocator.load()->malloc(size, device) : MallocNested(size, device, frames - 1);
  asm volatile("" : : "r"(p) : "memory");  // no tail call: each level stays a frame
  return p;
}
__attribute__((noinline)) void FreeNested(void* ptr, int frames) {
  if (frames <= 0) {
    fake::allocator.load()->free(ptr);
  } else {
    FreeNested(ptr, frames - 1);
  }
  asm volatile("" : : : "memory");
}
}  // namespace
extern "C" __attribute__((visibility("default"))) void* fake_torch_malloc_nested(size_t size, int device, int frames) {
  return MallocNested(size, device, frames);
}
extern "C" __attribute__((visibility("default"))) void fake_torch_free_nested(void* ptr, int frames) {
  FreeNested(ptr, frames);
}
extern "C" __attribute__((visibility("default"))) void fake_torch_empty_cache() {
  fake::allocator.load()->emptyCache();
}
// A driver allocation made from inside this library before the allocator exists (as a library initialising
// itself might): the tracker cannot attach yet and must try again at the next segment.
extern "C" __attribute__((visibility("default"))) CUdeviceptr fake_torch_raw_alloc(size_t size) {
  CUdeviceptr ptr = 0;
  return cuMemAlloc(&ptr, size) == CUDA_SUCCESS ? ptr : 0;
}
