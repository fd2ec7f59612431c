// Tests of the test doubles: the fake libcuda.so.1 and libcudart.so.13 are the oracle of the end-to-end tests (their
// ledger is what a trace is compared against), so what they promise is checked here on its own, without cumemtrace:
// address reuse, the total and planted failures, errno, the ledger's lines, cuGetProcAddress's versions and
// per-thread variants, the runtime's single labelled driver call per runtime call.
#include <dlfcn.h>
#include <errno.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "fake_cuda_control.h"
#include "range_allocator.h"

#include <cupti.h>  // callback ids and parameter structs only; nothing of CUPTI is linked

namespace cumemtrace::fakes {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kTotal = 1024 * kMiB;
constexpr uint64_t kFailAbove = 256 * kMiB;

std::string LedgerPath() { return testing::TempDir() + "fake_cuda_test_ledger." + std::to_string(getpid()); }

// The ledger lines appended since construction.
class LedgerTail {
 public:
  LedgerTail() : start_(Size()) {}
  std::vector<std::string> Lines() const {
    std::ifstream in(LedgerPath());
    in.seekg(static_cast<std::streamoff>(start_));
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

 private:
  static uint64_t Size() {
    std::ifstream in(LedgerPath(), std::ios::ate);
    return in ? static_cast<uint64_t>(in.tellg()) : 0;
  }
  uint64_t start_;
};

std::string Hex(uint64_t value) {
  std::ostringstream out;
  out << "0x" << std::hex << value;
  return out.str();
}

// "<op> <api> <address> <size> <result> pid=<this process> tid=<this thread> dev=<device>"
std::string Expected(const char* op, const char* api, uint64_t address, uint64_t size, int result, int device = 0) {
  return std::string(op) + " " + api + " " + Hex(address) + " " + std::to_string(size) + " " + std::to_string(result) +
         " pid=" + std::to_string(getpid()) + " tid=" + std::to_string(gettid()) + " dev=" + std::to_string(device);
}

class FakeCudaTest : public testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cuInit(0), CUDA_SUCCESS); }
};

TEST(RangeAllocatorTest, FirstFitReusesAndCoalesces) {
  RangeAllocator ranges(0x10000, 0x10000);
  const uint64_t a = ranges.Allocate(0x1000, 0x100);
  const uint64_t b = ranges.Allocate(0x2000, 0x100);
  const uint64_t c = ranges.Allocate(0x1000, 0x100);
  EXPECT_EQ(a, 0x10000u);
  EXPECT_EQ(b, 0x11000u);
  EXPECT_EQ(c, 0x13000u);
  ranges.Free(b, 0x2000);
  EXPECT_EQ(ranges.Allocate(0x1000, 0x100), b);      // lowest hole first
  ranges.Free(a, 0x1000);
  ranges.Free(b, 0x1000);                           // coalesces with a's hole and the rest of b's
  EXPECT_EQ(ranges.Allocate(0x3000, 0x100), a);
  EXPECT_EQ(ranges.Allocate(0x100000, 0x100), 0u);  // does not fit
  EXPECT_EQ(ranges.Allocate(0x1000, 0x4000), 0x14000u);
  EXPECT_EQ(ranges.free_bytes(), 0x10000u - 0x3000 - 0x1000 - 0x1000);
}

// The allocator as it was before it filed ranges by size class: every free range walked from the lowest address.
// What it returns is what first fit means; the filed search must return the same, call for call.
class WalkingFirstFit {
 public:
  WalkingFirstFit(uint64_t base, uint64_t size) { free_[base] = size; }
  uint64_t Allocate(uint64_t size, uint64_t alignment) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      const uint64_t start = it->first;
      const uint64_t end = start + it->second;
      const uint64_t aligned = (start + alignment - 1) & ~(alignment - 1);
      if (aligned < start || aligned >= end || end - aligned < size) continue;
      free_.erase(it);
      if (aligned > start) free_[start] = aligned - start;
      if (aligned + size < end) free_[aligned + size] = end - (aligned + size);
      return aligned;
    }
    return 0;
  }
  void Free(uint64_t address, uint64_t size) {
    auto next = free_.lower_bound(address);
    uint64_t start = address;
    uint64_t length = size;
    if (next != free_.begin() && std::prev(next)->first + std::prev(next)->second == start) {
      start = std::prev(next)->first;
      length += std::prev(next)->second;
      free_.erase(std::prev(next));
    }
    if (next != free_.end() && next->first == address + size) {
      length += next->second;
      free_.erase(next);
    }
    free_[start] = length;
  }

 private:
  std::map<uint64_t, uint64_t> free_;
};

TEST(RangeAllocatorTest, FindsWhatWalkingEveryRangeFinds) {
  // Sizes from a byte to most of the space, alignments from 1 to 2 MiB, a live set that grows to fill the space
  // and shrinks again: fragments of every class, and requests that fit only after alignment or not at all.
  constexpr uint64_t kBase = 0x7f0000000000;
  constexpr uint64_t kSpace = uint64_t{1} << 32;
  RangeAllocator filed(kBase, kSpace);
  WalkingFirstFit walking(kBase, kSpace);
  std::mt19937_64 random(26);
  std::vector<std::pair<uint64_t, uint64_t>> live;
  uint64_t allocated = 0;
  uint64_t failed = 0;
  size_t most_live = 0;
  for (int i = 0; i < 60000; ++i) {
    const bool grow = (i / 5000) % 2 == 0;
    if (!live.empty() && random() % 100 < (grow ? 35u : 65u)) {
      const size_t pick = random() % live.size();
      filed.Free(live[pick].first, live[pick].second);
      walking.Free(live[pick].first, live[pick].second);
      allocated -= live[pick].second;
      live[pick] = live.back();
      live.pop_back();
      continue;
    }
    const uint64_t size =
        random() % 8 == 0 ? 1 + random() % (kSpace / 8) : 1 + random() % (uint64_t{1} << (random() % 24));
    const uint64_t alignment = uint64_t{1} << (random() % 22);
    const uint64_t got = filed.Allocate(size, alignment);
    ASSERT_EQ(got, walking.Allocate(size, alignment))
        << "call " << i << ": " << size << " bytes aligned to " << alignment;
    if (got == 0) {
      ++failed;
      continue;
    }
    EXPECT_EQ(got % alignment, 0u);
    live.emplace_back(got, size);
    most_live = std::max(most_live, live.size());
    allocated += size;
    ASSERT_EQ(filed.free_bytes(), kSpace - allocated);
  }
  EXPECT_GT(failed, 100u);  // the space did fill up
  EXPECT_GT(most_live, 100u);
}

TEST(FakeCudaInitTest, MemoryCallsNeedCuInit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, where cuInit was never called
  EXPECT_EXIT(
      {
        CUdeviceptr p = 0;
        size_t free = 0;
        size_t total = 0;
        int version = 0;
        void* fn = nullptr;
        const bool ok = cuMemAlloc(&p, kMiB) == CUDA_ERROR_NOT_INITIALIZED &&
                        cuMemGetInfo(&free, &total) == CUDA_ERROR_NOT_INITIALIZED &&
                        cuDriverGetVersion(&version) == CUDA_SUCCESS && version == kFakeCudaDriverVersion &&
                        cuGetProcAddress("cuInit", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) == CUDA_SUCCESS;
        exit(ok ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

TEST_F(FakeCudaTest, ReusesFreedAddressesAndWritesTheLedger) {
  LedgerTail tail;
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_EQ(cuMemAlloc(&a, kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&b, kMiB), CUDA_SUCCESS);
  EXPECT_NE(a, b);
  ASSERT_EQ(cuMemFree(a), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&c, kMiB), CUDA_SUCCESS);
  EXPECT_EQ(c, a);
  EXPECT_EQ(cuMemFree(a + 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemFree(b), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(c), CUDA_SUCCESS);
  EXPECT_EQ(tail.Lines(), (std::vector<std::string>{
                              Expected("alloc", "cuMemAlloc_v2", a, kMiB, 0),
                              Expected("alloc", "cuMemAlloc_v2", b, kMiB, 0),
                              Expected("free", "cuMemFree_v2", a, 0, 0),
                              Expected("alloc", "cuMemAlloc_v2", c, kMiB, 0),
                              Expected("free", "cuMemFree_v2", a + 1, 0, CUDA_ERROR_INVALID_VALUE),
                              Expected("free", "cuMemFree_v2", b, 0, 0),
                              Expected("free", "cuMemFree_v2", c, 0, 0),
                          }));
}

// What the API callback (the fake libcupti's hook into the driver) is handed: enter and exit of every memory call,
// with CUPTI's callback id, the parameter struct CUPTI defines for it, and at exit the result; the internal path
// calls it like any API call.
struct SeenCall {
  int site;
  unsigned int cbid;
  std::string name;
  uint64_t address;  // *dptr at exit for allocations, dptr for frees
  int result;
};
std::vector<SeenCall> seen_calls;

void RecordCallback(void*, int site, unsigned int cbid, const char* name, const void* params, const CUresult* r) {
  uint64_t address = 0;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 && site == 1) {
    address = *static_cast<const cuMemAlloc_v2_params*>(params)->dptr;
  } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2) {
    address = static_cast<const cuMemFree_v2_params*>(params)->dptr;
  }
  seen_calls.push_back({site, cbid, name, address, r != nullptr ? static_cast<int>(*r) : -1});
}

TEST_F(FakeCudaTest, ApiCallbackSurroundsMemoryCallsIncludingTheInternalPath) {
  seen_calls.clear();
  FakeCudaSetApiCallback(RecordCallback, nullptr);
  CUdeviceptr a = 0, b = 0;
  size_t free = 0, total = 0;
  ASSERT_EQ(cuMemAlloc(&a, kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);  // not a memory function: no callback
  ASSERT_EQ(FakeCudaInternalAlloc(&b, 2 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(FakeCudaInternalFree(b), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(a + 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemFree(a), CUDA_SUCCESS);
  FakeCudaSetApiCallback(nullptr, nullptr);
  const unsigned int kAlloc = CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, kFree = CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2;
  const std::vector<std::string> expected = {
      "0 cuMemAlloc_v2 0 -1",   "1 cuMemAlloc_v2 " + std::to_string(a) + " 0",
      "0 cuMemAlloc_v2 0 -1",   "1 cuMemAlloc_v2 " + std::to_string(b) + " 0",
      "0 cuMemFree_v2 " + std::to_string(b) + " -1", "1 cuMemFree_v2 " + std::to_string(b) + " 0",
      "0 cuMemFree_v2 " + std::to_string(a + 1) + " -1",
      "1 cuMemFree_v2 " + std::to_string(a + 1) + " " + std::to_string(CUDA_ERROR_INVALID_VALUE),
      "0 cuMemFree_v2 " + std::to_string(a) + " -1", "1 cuMemFree_v2 " + std::to_string(a) + " 0",
  };
  std::vector<std::string> got;
  for (const SeenCall& c : seen_calls) {
    EXPECT_EQ(c.cbid, c.name == "cuMemAlloc_v2" ? kAlloc : kFree) << c.name;
    got.push_back(std::to_string(c.site) + " " + c.name + " " + std::to_string(c.address) + " " +
                  std::to_string(c.result));
  }
  EXPECT_EQ(got, expected);
}

TEST_F(FakeCudaTest, EnforcesTheTotalAndPlantedFailures) {
  size_t free = 0, total = 0;
  ASSERT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, kTotal);
  EXPECT_EQ(free, kTotal);
  LedgerTail tail;
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc(&p, kFailAbove + 1), CUDA_ERROR_OUT_OF_MEMORY);
  std::vector<CUdeviceptr> held(4);
  for (CUdeviceptr& h : held) ASSERT_EQ(cuMemAlloc(&h, kFailAbove), CUDA_SUCCESS);  // exactly the total
  ASSERT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
  EXPECT_EQ(free, 0u);
  EXPECT_EQ(cuMemAllocManaged(&p, 512, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
  for (CUdeviceptr h : held) ASSERT_EQ(cuMemFree(h), CUDA_SUCCESS);
  const std::vector<std::string> lines = tail.Lines();
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_EQ(lines[0], Expected("alloc", "cuMemAlloc_v2", 0, kFailAbove + 1, 2) + " free=" +
                          std::to_string(kTotal) + " total=" + std::to_string(kTotal));
  EXPECT_EQ(lines[5], Expected("alloc", "cuMemAllocManaged", 0, 512, 2) + " free=0 total=" + std::to_string(kTotal));
}

TEST_F(FakeCudaTest, PreservesErrno) {
  CUdeviceptr p = 0;
  errno = 4242;
  ASSERT_EQ(cuMemAlloc(&p, kMiB), CUDA_SUCCESS);
  EXPECT_EQ(errno, 4242);
  EXPECT_EQ(cuMemAlloc(&p, kTotal * 2), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(errno, 4242);
  void* host = nullptr;
  EXPECT_EQ(cuMemHostAlloc(&host, 1ull << 50, 0), CUDA_ERROR_OUT_OF_MEMORY);  // a failing mmap underneath
  EXPECT_EQ(errno, 4242);
  ASSERT_EQ(cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(errno, 4242);
}

TEST_F(FakeCudaTest, HostMemoryIsRealAndRegistrationsAreChecked) {
  LedgerTail tail;
  void* pinned = nullptr;
  ASSERT_EQ(cuMemHostAlloc(&pinned, kMiB, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
  memset(pinned, 0x5a, kMiB);
  void* small = nullptr;
  ASSERT_EQ(cuMemAllocHost(&small, 100), CUDA_SUCCESS);
  static_cast<char*>(small)[99] = 1;
  std::vector<char> buffer(64 * 1024);
  ASSERT_EQ(cuMemHostRegister(buffer.data(), buffer.size(), 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemHostRegister(buffer.data() + 100, 10, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(cuMemHostUnregister(buffer.data() + 100), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  ASSERT_EQ(cuMemHostUnregister(buffer.data()), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeHost(buffer.data()), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeHost(small), CUDA_SUCCESS);
  const auto data = reinterpret_cast<uint64_t>(buffer.data());
  EXPECT_EQ(tail.Lines(), (std::vector<std::string>{
                              Expected("alloc", "cuMemHostAlloc", reinterpret_cast<uint64_t>(pinned), kMiB, 0),
                              Expected("alloc", "cuMemAllocHost_v2", reinterpret_cast<uint64_t>(small), 100, 0),
                              Expected("alloc", "cuMemHostRegister_v2", data, buffer.size(), 0),
                              Expected("alloc", "cuMemHostRegister_v2", data + 100, 10, 712) + " free=" +
                                  std::to_string(kTotal) + " total=" + std::to_string(kTotal),
                              Expected("free", "cuMemHostUnregister", data + 100, 0, 713),
                              Expected("free", "cuMemHostUnregister", data, 0, 0),
                              Expected("free", "cuMemFreeHost", data, 0, 1),
                              Expected("free", "cuMemFreeHost", reinterpret_cast<uint64_t>(pinned), 0, 0),
                              Expected("free", "cuMemFreeHost", reinterpret_cast<uint64_t>(small), 0, 0),
                          }));
}

TEST_F(FakeCudaTest, PitchAndStreamOrderedAllocations) {
  LedgerTail tail;
  CUdeviceptr p = 0;
  size_t pitch = 0;
  ASSERT_EQ(cuMemAllocPitch(&p, &pitch, 1000, 10, 4), CUDA_SUCCESS);
  EXPECT_EQ(pitch, 1024u);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuDeviceGetDefaultMemPool(&pool, 1), CUDA_SUCCESS);
  CUdeviceptr q = 0, r = 0;
  ASSERT_EQ(cuMemAllocAsync(&q, kMiB, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocFromPoolAsync(&r, kMiB, pool, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(q, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(r), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(p), CUDA_SUCCESS);
  const std::string s = " stream=" + Hex(reinterpret_cast<uint64_t>(stream));
  EXPECT_EQ(tail.Lines(), (std::vector<std::string>{
                              Expected("alloc", "cuMemAllocPitch_v2", p, 10240, 0),
                              Expected("alloc", "cuMemAllocAsync", q, kMiB, 0) + s,
                              Expected("alloc", "cuMemAllocFromPoolAsync", r, kMiB, 0, 1) + s,
                              Expected("free", "cuMemFreeAsync", q, 0, 0) + s,
                              Expected("free", "cuMemFree_v2", r, 0, 0, 1),
                              Expected("free", "cuMemFree_v2", p, 0, 0),
                          }));
}

TEST_F(FakeCudaTest, VirtualMemoryBookkeeping) {
  LedgerTail tail;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t granularity = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  CUmemGenericAllocationHandle handle = 0, odd = 0;
  EXPECT_EQ(cuMemCreate(&odd, granularity + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemCreate(&handle, 2 * granularity, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 4 * granularity, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemMap(va + 3 * granularity, 2 * granularity, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // overhangs
  ASSERT_EQ(cuMemMap(va, 2 * granularity, 0, handle, 0), CUDA_SUCCESS);
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  EXPECT_EQ(cuMemSetAccess(va, 2 * granularity, &access, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemUnmap(va, 2 * granularity), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(va, 4 * granularity), CUDA_SUCCESS);
  const std::string mem_info = " free=" + std::to_string(kTotal) + " total=" + std::to_string(kTotal);
  EXPECT_EQ(tail.Lines(), (std::vector<std::string>{
                              Expected("alloc", "cuMemCreate", 0, granularity + 1, 1) + mem_info,
                              Expected("alloc", "cuMemCreate", handle, 2 * granularity, 0),
                              Expected("alloc", "cuMemAddressReserve", va, 4 * granularity, 0),
                              Expected("alloc", "cuMemMap", va + 3 * granularity, 2 * granularity, 1) + " aux=" +
                                  Hex(handle) + " free=" + std::to_string(kTotal - 2 * granularity) +
                                  " total=" + std::to_string(kTotal),
                              Expected("alloc", "cuMemMap", va, 2 * granularity, 0) + " aux=" + Hex(handle),
                              Expected("free", "cuMemUnmap", va, 0, 0),
                              Expected("free", "cuMemRelease", handle, 0, 0),
                              Expected("free", "cuMemAddressFree", va, 0, 0),
                          }));
}

TEST_F(FakeCudaTest, GetProcAddressFollowsVersionsAndFlags) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  ASSERT_EQ(cuGetProcAddress("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  ASSERT_EQ(cuGetProcAddress("cuMemAllocAsync", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
            CUDA_SUCCESS);
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"));
  ASSERT_EQ(cuGetProcAddress("cuMemAllocAsync", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status), CUDA_SUCCESS);
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemAllocAsync"));
  ASSERT_EQ(cuGetProcAddress("cuMemAlloc", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
            CUDA_SUCCESS);
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));  // no per-thread variant: the plain one
  ASSERT_EQ(cuGetProcAddress("cuGetProcAddress", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status), CUDA_SUCCESS);
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"));

  fn = &status;
  EXPECT_EQ(cuGetProcAddress("cuMemAlloc_v2", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status),
            CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(cuGetProcAddress("cuMemAlloc", &fn, 3000, CU_GET_PROC_ADDRESS_DEFAULT, &status), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

  using LegacyGetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t);
  auto legacy = reinterpret_cast<LegacyGetProcAddress>(dlsym(RTLD_DEFAULT, "cuGetProcAddress"));
  ASSERT_NE(legacy, nullptr);
  ASSERT_EQ(legacy("cuMemFree", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT), CUDA_SUCCESS);
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemFree_v2"));
}

TEST_F(FakeCudaTest, RuntimeMakesOneLabelledDriverCallPerRuntimeCall) {
  LedgerTail tail;
  void* zero = &zero;
  ASSERT_EQ(cudaMalloc(&zero, 0), cudaSuccess);
  EXPECT_EQ(zero, nullptr);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, kMiB), cudaSuccess);
  void* huge = nullptr;
  EXPECT_EQ(cudaMalloc(&huge, kFailAbove * 2), cudaErrorMemoryAllocation);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 1);
  void* on_one = nullptr;
  ASSERT_EQ(cudaMallocManaged(&on_one, kMiB, cudaMemAttachGlobal), cudaSuccess);
  ASSERT_EQ(cudaFree(on_one), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  CUdeviceptr direct = 0;
  ASSERT_EQ(cuMemAlloc(&direct, kMiB), CUDA_SUCCESS);  // not through the runtime: no label
  ASSERT_EQ(cuMemFree(direct), CUDA_SUCCESS);
  const auto a = reinterpret_cast<uint64_t>(p);
  const auto m = reinterpret_cast<uint64_t>(on_one);
  EXPECT_EQ(tail.Lines(), (std::vector<std::string>{
                              Expected("alloc", "cuMemAlloc_v2", a, kMiB, 0) + " via=cudaMalloc",
                              Expected("alloc", "cuMemAlloc_v2", 0, kFailAbove * 2, 2) + " free=" +
                                  std::to_string(kTotal - kMiB) + " total=" + std::to_string(kTotal) +
                                  " via=cudaMalloc",
                              Expected("alloc", "cuMemAllocManaged", m, kMiB, 0, 1) + " via=cudaMallocManaged",
                              Expected("free", "cuMemFree_v2", m, 0, 0, 1) + " via=cudaFree",
                              Expected("free", "cuMemFree_v2", a, 0, 0) + " via=cudaFree",
                              Expected("alloc", "cuMemAlloc_v2", direct, kMiB, 0),
                              Expected("free", "cuMemFree_v2", direct, 0, 0),
                          }));
}

TEST_F(FakeCudaTest, RuntimeEntryPointsComeFromTheDriver) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &status), cudaSuccess);
  EXPECT_EQ(status, cudaDriverEntryPointSuccess);
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuMemFreeAsync", &fn, 13000, cudaEnablePerThreadDefaultStream, &status),
            cudaSuccess);
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemFreeAsync_ptsz"));
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuNoSuchThing", &fn, 13000, cudaEnableDefault, &status), cudaSuccess);
  EXPECT_EQ(status, cudaDriverEntryPointSymbolNotFound);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 99000, cudaEnableDefault, &status),
            cudaErrorInvalidValue);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  ASSERT_EQ(cudaGetDriverEntryPoint("cuMemHostAlloc", &fn, cudaEnableDefault, &status), cudaSuccess);
#pragma GCC diagnostic pop
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemHostAlloc"));
}

}  // namespace
}  // namespace cumemtrace::fakes

// The fake driver reads its configuration once, at its first call: set it before any test runs.
int main(int argc, char** argv) {
  setenv("FAKE_CUDA_LEDGER", cumemtrace::fakes::LedgerPath().c_str(), 1);
  setenv("FAKE_CUDA_TOTAL_BYTES", std::to_string(cumemtrace::fakes::kTotal).c_str(), 1);
  setenv("FAKE_CUDA_FAIL_ABOVE", std::to_string(cumemtrace::fakes::kFailAbove).c_str(), 1);
  unsetenv("FAKE_CUDA_DEVICE");
  unsetenv("FAKE_CUDA_DEVICE_COUNT");
  testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  unlink(cumemtrace::fakes::LedgerPath().c_str());
  return result;
}
