// Constants of the trace format shared by the preload (which cannot use the protoc-generated classes) and the
// analyzer: the magic, the version, the field numbers the preload's encoder writes, and the api table that says
// what each Api value means. Header-only, no dependencies, usable from the preload's no-libstdc++ build.
//
// The field numbers here must equal those in trace.proto: tests/conformance proves it by parsing what the preload's
// encoder writes with the generated classes.
#ifndef CUMEMTRACE_PROTO_FORMAT_H_
#define CUMEMTRACE_PROTO_FORMAT_H_

#include <stdint.h>

namespace cumemtrace::format {

inline constexpr uint64_t kMagic = 0x435254454d454d43ull;  // "CUMEMTRC" little-endian
// Version 2: the stack column covers only rows whose api has a stack; thread/device columns may be run-length coded.
// Version 3: an EventBatch may store its address deltas divided by 2^address_shift.
// Version 4: TORCH_ALLOC_GRAD / TORCH_ALLOC_NO_GRAD rows (a block with autograd's grad mode).
// Version 5: TORCH_SEGMENT_FREE and TORCH_SEGMENT_UNMAP rows have a stack (RowHasStack); event batches may come
// zstd-compressed (packet events_zstd).
// Version 6: event batches may come as parts of a zstd frame that runs across packets (packet events_stream), and
// may store their times in units of time_unit_ns.
inline constexpr uint32_t kFormatVersion = 6;
inline constexpr int32_t kHostDevice = -1;

// Field numbers (see trace.proto).
namespace field {
inline constexpr uint32_t kTracePacket = 1;
namespace packet {
inline constexpr uint32_t kHeader = 1, kThread = 2, kModule = 3, kStackNodes = 4, kEvents = 5, kStrings = 6,
                          kSymbols = 7, kTrailer = 8, kDevice = 9, kPythonFrames = 10,
                          kMemorySample = 11, kNotice = 12, kAllocatorAttach = 13, kPhase = 14,
                          kHeaderCopy = 15, kGpuProcesses = 16, kEventsZstd = 17,
                          kEventsStream = 18;
}
namespace header {
inline constexpr uint32_t kMagic = 1, kFormatVersion = 2, kToolVersion = 3, kPid = 4, kPpid = 5, kArgv = 6,
                          kHostname = 7, kClockId = 8, kStartTimeNs = 9, kStartUnixTimeNs = 10,
                          kDriverVersion = 11, kRuntimeVersion = 12, kStackDepth = 13, kExecutable = 14,
                          kRank = 15, kLocalRank = 16, kWorldSize = 17, kForkedChild = 18,
                          kPythonFramesEnabled = 19, kCuptiEnabled = 20, kTorchStackDepth = 21;
}
namespace device {
inline constexpr uint32_t kOrdinal = 1, kName = 2, kUuid = 3, kTotalMemory = 4, kDriverVersion = 5;
}
namespace thread {
inline constexpr uint32_t kIndex = 1, kTid = 2, kName = 3;
}
namespace module {
inline constexpr uint32_t kId = 1, kPath = 2, kLoadBias = 3, kStart = 4, kEnd = 5, kBuildId = 6;
}
namespace stack_nodes {
inline constexpr uint32_t kFirstId = 1, kParent = 2, kPc = 3;
}
namespace python_frames {
inline constexpr uint32_t kFirstId = 1, kFunction = 2, kFile = 3, kLine = 4;
}
namespace memory_sample {
inline constexpr uint32_t kTimeNs = 1, kDevice = 2, kFreeBytes = 3, kTotalBytes = 4, kAfterSeq = 5;
}
namespace gpu_processes {
inline constexpr uint32_t kTimeNs = 1, kAfterSeq = 2, kDevice = 3, kReason = 4, kPids = 5, kProcess = 6, kError = 7;
}
namespace gpu_process {
inline constexpr uint32_t kPid = 1, kUsedBytes = 2, kUsedUnknown = 3, kSelf = 4, kCommand = 5;
}
namespace notice {
inline constexpr uint32_t kCode = 1, kMessage = 2, kTimeNs = 3;
}
namespace allocator_attach {
inline constexpr uint32_t kAfterSeq = 1, kTimeNs = 2, kLibrary = 3, kDevices = 4, kConfig = 5, kAtFirstSegment = 6;
}
namespace phase {
inline constexpr uint32_t kAfterSeq = 1, kTimeNs = 2, kThread = 3, kKind = 4, kName = 5, kRangeId = 6, kDomain = 7;
}
namespace strings {
inline constexpr uint32_t kFirstId = 1, kValue = 2;
}
namespace symbols {
inline constexpr uint32_t kPc = 1, kFunction = 2, kModule = 3, kOffset = 4, kFile = 5, kLine = 6;
}
namespace events {
inline constexpr uint32_t kFirstSeq = 1, kBaseTimeNs = 2, kSeqDelta = 3, kTimeDeltaNs = 4, kApi = 5,
                          kAddressDelta = 6, kSize = 7, kStack = 8, kThread = 9, kDevice = 10, kStream = 11,
                          kAux = 12, kFailures = 13, kCuptiRows = 14, kCompleteBelow = 15,
                          kThreadRuns = 16, kDeviceRuns = 17, kAddressShift = 18,
                          kTimeUnitNs = 19;
}
namespace streamed_events {
inline constexpr uint32_t kPart = 1, kZstd = 2, kCrc32c = 3;
}
namespace failure {
inline constexpr uint32_t kRow = 1, kResult = 2, kFreeBytes = 3, kTotalBytes = 4, kHasMemInfo = 5;
}
namespace trailer {
inline constexpr uint32_t kEvents = 1, kDroppedEvents = 2, kUnwindFailures = 3, kTruncatedStacks = 4,
                          kBytesWritten = 5, kStackNodes = 6, kWrapperSlotsExhausted = 7, kEndTimeNs = 8,
                          kRecorderTimeNs = 9, kFlushes = 10, kPythonStacks = 11,
                          kPythonFailures = 12, kMemorySamples = 13, kCuptiOnlyEvents = 14,
                          kAllocatorEvents = 15, kAllocatorIgnored = 16, kDroppedFrames = 17,
                          kRecorderPythonNs = 18, kRecorderUnwindNs = 19, kRecorderLockWaitNs = 20,
                          kRecorderStackNs = 21, kWriterTimeNs = 22, kStalledSeals = 23,
                          kClockCalibrations = 24, kClockMaxErrorNs = 25, kClockSteps = 26,
                          kRecorderPrologueNs = 27, kRecorderAppendNs = 28;
}
}  // namespace field

// Notice codes (trace.proto's Notice.Code).
enum class NoticeCode : uint32_t {
  kUnknown = 0,
  kPythonUnsupported = 1,
  kPythonLayoutMismatch = 2,
  kCuptiUnavailable = 3,
  kCuptiOnlyEvent = 4,
  kSymbolsFromDebugInfo = 5,
  kTorchAllocatorUnavailable = 6,
  kTorchAllocatorIgnored = 7,
  kWriteFailed = 8,
  kGradModeUnknown = 9,
};

// Notice codes as reports and JSON spell them (trace.proto's Notice.Code names, lower case).
inline constexpr const char* NoticeCodeName(NoticeCode code) {
  switch (code) {
    case NoticeCode::kPythonUnsupported: return "python_unsupported";
    case NoticeCode::kPythonLayoutMismatch: return "python_layout_mismatch";
    case NoticeCode::kCuptiUnavailable: return "cupti_unavailable";
    case NoticeCode::kCuptiOnlyEvent: return "cupti_only_event";
    case NoticeCode::kSymbolsFromDebugInfo: return "symbols_from_debug_info";
    case NoticeCode::kTorchAllocatorUnavailable: return "torch_allocator_unavailable";
    case NoticeCode::kTorchAllocatorIgnored: return "torch_allocator_ignored";
    case NoticeCode::kWriteFailed: return "write_failed";
    case NoticeCode::kGradModeUnknown: return "grad_mode_unknown";
    case NoticeCode::kUnknown: break;
  }
  return "unknown";
}

// Phase kinds (trace.proto's Phase.Kind).
enum class PhaseKind : uint32_t { kUnknown = 0, kPush = 1, kPop = 2, kStart = 3, kEnd = 4, kMark = 5 };

// A stack node pc with this bit set names a Python frame (PythonFrames id) instead of an address; id 0 = "no Python
// frames on this thread". User-space addresses on every platform cumemtrace runs on leave bit 63 clear.
inline constexpr uint64_t kPythonFramePcBit = 1ull << 63;
inline constexpr bool IsPythonFramePc(uint64_t pc) { return (pc & kPythonFramePcBit) != 0; }
inline constexpr uint64_t PythonFrameIdOfPc(uint64_t pc) { return pc & ~kPythonFramePcBit; }
inline constexpr uint64_t PcOfPythonFrameId(uint64_t id) { return id | kPythonFramePcBit; }
inline constexpr uint64_t kNoPythonFramesId = 0;

// Api values (trace.proto's enum Api).
enum class Api : uint32_t {
  kUnknown = 0,
  kCuMemAlloc = 1,
  kCuMemAllocPitch = 2,
  kCuMemAllocManaged = 3,
  kCuMemAllocHost = 4,
  kCuMemHostAlloc = 5,
  kCuMemHostRegister = 6,
  kCuMemAllocAsync = 7,
  kCuMemAllocFromPoolAsync = 8,
  kCuMemCreate = 9,
  kCuMemAddressReserve = 10,
  kCuMemMap = 11,
  kCuMemFree = 20,
  kCuMemFreeHost = 21,
  kCuMemHostUnregister = 22,
  kCuMemFreeAsync = 23,
  kCuMemRelease = 24,
  kCuMemAddressFree = 25,
  kCuMemUnmap = 26,
  kCudaMalloc = 40,
  kCudaMallocPitch = 41,
  kCudaMallocManaged = 42,
  kCudaMallocHost = 43,
  kCudaHostAlloc = 44,
  kCudaHostRegister = 45,
  kCudaMallocAsync = 46,
  kCudaFree = 60,
  kCudaFreeHost = 61,
  kCudaHostUnregister = 62,
  kCudaFreeAsync = 63,
  kTorchAlloc = 80,
  kTorchFreeRequested = 81,
  kTorchFreeCompleted = 82,
  kTorchSegmentAlloc = 83,
  kTorchSegmentFree = 84,
  kTorchSegmentMap = 85,
  kTorchSegmentUnmap = 86,
  kTorchOom = 87,
  kTorchFree = 88,
  kTorchAllocGrad = 89,
  kTorchAllocNoGrad = 90,
};

enum class Op : uint8_t { kNone, kAlloc, kFree };

// Memory kinds, each its own timeline per device. Spelled in reports and JSON as KindName() returns.
enum class Kind : uint8_t {
  kUnknown,         // a free: its kind is the kind of the allocation it frees
  kDevice,
  kPinnedHost,
  kRegisteredHost,
  kManaged,
  kPool,            // stream-ordered (cudaMallocAsync / cuMemAllocFromPoolAsync)
  kVmmPhysical,     // cuMemCreate handles: physical memory
  kVmmMapped,       // cuMemMap ranges: physical memory made visible at an address (not counted twice)
  kAddressReserve,  // cuMemAddressReserve: address space, never memory
  kTorchBlock,      // a PyTorch caching-allocator block (a tensor) inside a segment already counted as device memory
};
inline constexpr int kNumKinds = 10;

// Allocations and frees pair up within an address space: plain allocations (all of one unified address space),
// VMM handles, VMM mappings and address reservations are four separate spaces. PyTorch's blocks and its segment
// events (TORCH_* apis) are two more: they describe memory that driver events already counted.
enum class Space : uint8_t { kAllocation, kVmmHandle, kVmmMapping, kAddressReservation, kTorchBlock, kTorchSegment };

struct ApiInfo {
  Api api;
  const char* name;
  Op op;
  Kind kind;       // for allocations; kUnknown for frees
  Space space;
  bool has_stream;
  bool has_aux;
  bool has_size;   // the row has an entry in the size column (every allocation; some TORCH_* apis)
  bool has_stack = true;  // the row has an entry in the stack column (format version 2)
};

// The one table of what each api does.
inline constexpr ApiInfo kApiTable[] = {
    {Api::kCuMemAlloc, "cuMemAlloc", Op::kAlloc, Kind::kDevice, Space::kAllocation, false, false, true},
    {Api::kCuMemAllocPitch, "cuMemAllocPitch", Op::kAlloc, Kind::kDevice, Space::kAllocation, false, false, true},
    {Api::kCuMemAllocManaged, "cuMemAllocManaged", Op::kAlloc, Kind::kManaged, Space::kAllocation, false, false,
     true},
    {Api::kCuMemAllocHost, "cuMemAllocHost", Op::kAlloc, Kind::kPinnedHost, Space::kAllocation, false, false, true},
    {Api::kCuMemHostAlloc, "cuMemHostAlloc", Op::kAlloc, Kind::kPinnedHost, Space::kAllocation, false, false, true},
    {Api::kCuMemHostRegister, "cuMemHostRegister", Op::kAlloc, Kind::kRegisteredHost, Space::kAllocation, false,
     false, true},
    {Api::kCuMemAllocAsync, "cuMemAllocAsync", Op::kAlloc, Kind::kPool, Space::kAllocation, true, false, true},
    {Api::kCuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", Op::kAlloc, Kind::kPool, Space::kAllocation, true,
     false, true},
    {Api::kCuMemCreate, "cuMemCreate", Op::kAlloc, Kind::kVmmPhysical, Space::kVmmHandle, false, false, true},
    {Api::kCuMemAddressReserve, "cuMemAddressReserve", Op::kAlloc, Kind::kAddressReserve,
     Space::kAddressReservation, false, false, true},
    {Api::kCuMemMap, "cuMemMap", Op::kAlloc, Kind::kVmmMapped, Space::kVmmMapping, false, true, true},
    {Api::kCuMemFree, "cuMemFree", Op::kFree, Kind::kUnknown, Space::kAllocation, false, false, false},
    {Api::kCuMemFreeHost, "cuMemFreeHost", Op::kFree, Kind::kUnknown, Space::kAllocation, false, false, false},
    {Api::kCuMemHostUnregister, "cuMemHostUnregister", Op::kFree, Kind::kUnknown, Space::kAllocation, false,
     false, false},
    {Api::kCuMemFreeAsync, "cuMemFreeAsync", Op::kFree, Kind::kUnknown, Space::kAllocation, true, false, false},
    {Api::kCuMemRelease, "cuMemRelease", Op::kFree, Kind::kUnknown, Space::kVmmHandle, false, false, false},
    {Api::kCuMemAddressFree, "cuMemAddressFree", Op::kFree, Kind::kUnknown, Space::kAddressReservation, false,
     false, false},
    {Api::kCuMemUnmap, "cuMemUnmap", Op::kFree, Kind::kUnknown, Space::kVmmMapping, false, false, false},
    {Api::kCudaMalloc, "cudaMalloc", Op::kAlloc, Kind::kDevice, Space::kAllocation, false, false, true},
    {Api::kCudaMallocPitch, "cudaMallocPitch", Op::kAlloc, Kind::kDevice, Space::kAllocation, false, false, true},
    {Api::kCudaMallocManaged, "cudaMallocManaged", Op::kAlloc, Kind::kManaged, Space::kAllocation, false, false, true},
    {Api::kCudaMallocHost, "cudaMallocHost", Op::kAlloc, Kind::kPinnedHost, Space::kAllocation, false, false, true},
    {Api::kCudaHostAlloc, "cudaHostAlloc", Op::kAlloc, Kind::kPinnedHost, Space::kAllocation, false, false, true},
    {Api::kCudaHostRegister, "cudaHostRegister", Op::kAlloc, Kind::kRegisteredHost, Space::kAllocation, false,
     false, true},
    {Api::kCudaMallocAsync, "cudaMallocAsync", Op::kAlloc, Kind::kPool, Space::kAllocation, true, false, true},
    {Api::kCudaFree, "cudaFree", Op::kFree, Kind::kUnknown, Space::kAllocation, false, false, false},
    {Api::kCudaFreeHost, "cudaFreeHost", Op::kFree, Kind::kUnknown, Space::kAllocation, false, false, false},
    {Api::kCudaHostUnregister, "cudaHostUnregister", Op::kFree, Kind::kUnknown, Space::kAllocation, false, false,
     false},
    {Api::kCudaFreeAsync, "cudaFreeAsync", Op::kFree, Kind::kUnknown, Space::kAllocation, true, false, false},
    // PyTorch's caching allocator (trace tracker). TORCH_FREE_REQUESTED ends a tensor's life (allocation counts
    // drop there); TORCH_FREE_COMPLETED only returns the block to the cache.
    {Api::kTorchAlloc, "torch.alloc", Op::kAlloc, Kind::kTorchBlock, Space::kTorchBlock, true, false, true},
    {Api::kTorchFreeRequested, "torch.free_requested", Op::kFree, Kind::kUnknown, Space::kTorchBlock, false, false,
     false, false},
    {Api::kTorchFreeCompleted, "torch.free_completed", Op::kNone, Kind::kUnknown, Space::kTorchBlock, false, false,
     false, false},
    {Api::kTorchSegmentAlloc, "torch.segment_alloc", Op::kNone, Kind::kUnknown, Space::kTorchSegment, true, false,
     true, false},
    {Api::kTorchSegmentFree, "torch.segment_free", Op::kNone, Kind::kUnknown, Space::kTorchSegment, true, false,
     true, false},
    {Api::kTorchSegmentMap, "torch.segment_map", Op::kNone, Kind::kUnknown, Space::kTorchSegment, true, false, true,
     false},
    {Api::kTorchSegmentUnmap, "torch.segment_unmap", Op::kNone, Kind::kUnknown, Space::kTorchSegment, true, false,
     true, false},
    {Api::kTorchOom, "torch.oom", Op::kNone, Kind::kUnknown, Space::kTorchSegment, true, true, true},
    // A FREE_REQUESTED directly followed by the FREE_COMPLETED of the same block on the same thread (no other
    // event between them): one row instead of two, a third fewer rows in a training loop.
    {Api::kTorchFree, "torch.free", Op::kFree, Kind::kUnknown, Space::kTorchBlock, false, false, false, false},
    // TORCH_ALLOC with autograd's grad mode on the allocating thread: recording, or not (version 4).
    {Api::kTorchAllocGrad, "torch.alloc", Op::kAlloc, Kind::kTorchBlock, Space::kTorchBlock, true, false, true},
    {Api::kTorchAllocNoGrad, "torch.alloc", Op::kAlloc, Kind::kTorchBlock, Space::kTorchBlock, true, false, true},
};

// Api values are small; a direct index over kApiTable makes the lookup one load (it is on every event's path in
// the preload and the analyzer). Built at compile time from the one table.
inline constexpr uint32_t kApiIndexSize = 128;
struct ApiIndex {
  const ApiInfo* entries[kApiIndexSize];
};
inline constexpr ApiIndex MakeApiIndex() {
  ApiIndex index{};
  for (const ApiInfo& info : kApiTable) index.entries[static_cast<uint32_t>(info.api)] = &info;
  return index;
}
inline constexpr ApiIndex kApiIndex = MakeApiIndex();

// True for the apis of PyTorch's caching allocator (its trace tracker), which never count memory of their own.
inline constexpr bool IsTorchApi(Api api) { return api >= Api::kTorchAlloc && api <= Api::kTorchAllocNoGrad; }

// A block handed out (TORCH_ALLOC, with or without autograd's grad mode).
inline constexpr bool IsTorchBlockAlloc(Api api) {
  return api == Api::kTorchAlloc || api == Api::kTorchAllocGrad || api == Api::kTorchAllocNoGrad;
}

// Autograd's grad mode when a block was allocated.
enum class GradMode : uint8_t { kUnknown, kRecording, kNotRecording };
inline constexpr GradMode GradModeOf(Api api) {
  return api == Api::kTorchAllocGrad ? GradMode::kRecording
         : api == Api::kTorchAllocNoGrad ? GradMode::kNotRecording : GradMode::kUnknown;
}

// Returns the table row for `api`, or nullptr for a value this version does not know.
inline constexpr const ApiInfo* FindApi(uint32_t api) { return api < kApiIndexSize ? kApiIndex.entries[api] : nullptr; }

// Whether a row of `info` has an entry in the stack column of a trace of format `version` (2 or later): the table's
// has_stack, and from version 5 a segment given back by PyTorch's allocator too (its stack tells
// torch.cuda.empty_cache() from a request that released cache under a memory cap or by garbage collection).
inline constexpr bool RowHasStack(const ApiInfo& info, uint32_t version) {
  if (info.api == Api::kTorchSegmentFree || info.api == Api::kTorchSegmentUnmap) return version >= 5;
  return info.has_stack;
}

inline constexpr const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kDevice: return "device";
    case Kind::kPinnedHost: return "pinned_host";
    case Kind::kRegisteredHost: return "registered_host";
    case Kind::kManaged: return "managed";
    case Kind::kPool: return "pool";
    case Kind::kVmmPhysical: return "vmm_physical";
    case Kind::kVmmMapped: return "vmm_mapped";
    case Kind::kAddressReserve: return "address_reserve";
    case Kind::kTorchBlock: return "torch_block";
    case Kind::kUnknown: break;
  }
  return "unknown";
}

}  // namespace cumemtrace::format

#endif  // CUMEMTRACE_PROTO_FORMAT_H_
