// Reads a cumemtrace trace file and hands its contents, decoded into plain structs, to a visitor. This is the only
// part of the analyzer that knows protobuf: the model, the reports and the tests see the structs below.
//
// Events reach the visitor in sequence-number order (the preload writes them in the order threads finished their
// calls; a free takes its number before the real free, so ordering by number is what pairs frees and reuses
// correctly). Metadata (threads, modules, stack nodes, strings, devices) reaches the visitor before the first
// event that needs it. A file cut off at the end is read up to its last whole packet and reported in ReadStats;
// anything else wrong with the input is an error Status whose message names the file, what is wrong and where.
#ifndef CUMEMTRACE_ANALYZER_READER_TRACE_READER_H_
#define CUMEMTRACE_ANALYZER_READER_TRACE_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/format.h"

namespace cumemtrace::analyzer {

struct TraceHeader {
  uint32_t format_version = 0;
  std::string tool_version;
  int32_t pid = 0;
  int32_t ppid = 0;
  std::vector<std::string> argv;
  std::string hostname;
  std::string executable;
  int64_t start_time_ns = 0;
  int64_t start_unix_time_ns = 0;
  int32_t driver_version = 0;
  uint32_t stack_depth = 0;
  uint32_t torch_stack_depth = 0;  // native frames of a PyTorch block allocation from Python (older traces: stack_depth)
  int32_t rank = -1;        // -1: not set by the launcher
  int32_t local_rank = -1;
  int32_t world_size = -1;
  bool forked_child = false;
  bool python_frames_enabled = false;
  bool cupti_enabled = false;
};

struct DeviceInfo {
  int32_t ordinal = 0;  // format::kHostDevice (-1) is the host
  std::string name;
  std::string uuid;     // raw bytes
  uint64_t total_memory = 0;
  int32_t driver_version = 0;
};

struct ThreadInfo {
  uint32_t index = 0;
  int32_t tid = 0;
  std::string name;
};

struct ModuleInfo {
  uint32_t id = 0;
  std::string path;
  uint64_t load_bias = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  std::string build_id;  // raw bytes
};

struct StackNode {
  uint64_t id = 0;
  uint64_t parent = 0;  // 0 = root
  uint64_t pc = 0;
};

struct SymbolInfo {
  uint64_t pc = 0;
  uint32_t function = 0;  // string id
  uint32_t module = 0;
  uint64_t offset = 0;
  uint32_t file = 0;      // string id, 0 = unknown
  uint32_t line = 0;      // 0 = unknown
};

// An interned Python frame (StackNode pcs with format::kPythonFramePcBit name these ids).
struct PythonFrameInfo {
  uint64_t id = 0;
  uint32_t function = 0;  // string id
  uint32_t file = 0;      // string id
  uint32_t line = 0;      // 0 = unknown
};

// The driver's free/total for one device at one moment (cuMemGetInfo).
struct MemorySample {
  int64_t time_ns = 0;
  int32_t device = 0;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t after_seq = 0;  // the last sequence number handed out when it was taken
};

// The processes NVML listed on one device (trace.proto's GpuProcesses).
struct GpuProcessInfo {
  uint32_t pid = 0;
  uint64_t used_bytes = 0;
  bool used_unknown = false;  // NVML could not say
  bool self = false;          // the traced process
  std::string command;        // "" when not read
};
struct GpuProcessesInfo {
  enum class Reason : uint8_t { kUnknown = 0, kSample = 1, kFailedAllocation = 2 };
  // kSame: pids are this machine's (the traced process is listed); kOtherNamespace: another pid namespace's (a
  // container's host); kUnknown: cannot tell (the traced process is not listed and nobody else is either).
  enum class Pids : uint8_t { kUnknown = 0, kSame = 1, kOtherNamespace = 2 };
  int64_t time_ns = 0;
  uint64_t after_seq = 0;
  int32_t device = 0;
  Reason reason = Reason::kUnknown;
  Pids pids = Pids::kUnknown;
  std::vector<GpuProcessInfo> processes;  // largest first
  std::string error;  // why there is no list ("" when there is one)
};

struct NoticeInfo {
  format::NoticeCode code = format::NoticeCode::kUnknown;
  std::string message;
  int64_t time_ns = 0;
};

// PyTorch's caching allocator was reached (trace.proto's AllocatorAttach): TORCH_* events follow from after_seq on.
struct AllocatorAttachInfo {
  uint64_t after_seq = 0;
  int64_t time_ns = 0;
  std::string library;
  uint32_t devices = 0;
  std::string config;           // PYTORCH_CUDA_ALLOC_CONF at attach, "" = defaults
  bool at_first_segment = false;
};

// An NVTX range opened or closed, or a mark (trace.proto's Phase): the program's own phases.
struct PhaseInfo {
  uint64_t after_seq = 0;  // the last sequence number handed out when it happened (0: before every event)
  int64_t time_ns = 0;
  uint32_t thread = 0;     // ThreadInfo::index
  format::PhaseKind kind = format::PhaseKind::kUnknown;
  std::string name;        // empty for pops and ends
  uint64_t range_id = 0;   // starts and ends
  uint32_t domain = 0;     // 0: NVTX's default domain
};

// Every event is copied twice on its way to the model (into the reorder window, then to the model's thread): its
// fields are ordered widest first, so that no padding lies between them.
struct Event {
  uint64_t seq = 0;
  int64_t time_ns = 0;
  const format::ApiInfo* info = nullptr;  // never null for a delivered event
  uint64_t address = 0;
  uint64_t size = 0;     // allocations only
  uint64_t stream = 0;   // apis with a stream only
  uint64_t aux = 0;      // apis with an aux value only (cuMemMap: the handle)
  uint64_t stack = 0;    // innermost stack node id, 0 = none
  uint64_t free_bytes = 0;   // driver's free/total right after a failed allocation (has_mem_info)
  uint64_t total_bytes = 0;
  format::Api api = format::Api::kUnknown;
  int32_t device = 0;
  uint32_t thread = 0;   // ThreadInfo::index
  int32_t result = 0;    // 0 = success
  bool has_mem_info = false;
  bool cupti_only = false;   // seen by CUPTI, missed by interposition
};

struct TrailerInfo {
  uint64_t events = 0;
  uint64_t dropped_events = 0;
  uint64_t unwind_failures = 0;
  uint64_t truncated_stacks = 0;
  uint64_t bytes_written = 0;
  uint64_t stack_nodes = 0;
  uint64_t wrapper_slots_exhausted = 0;
  int64_t end_time_ns = 0;
  uint64_t recorder_time_ns = 0;
  uint64_t recorder_python_ns = 0;  // parts of recorder_time_ns (trace.proto)
  uint64_t recorder_unwind_ns = 0;
  uint64_t recorder_lock_wait_ns = 0;
  uint64_t recorder_stack_ns = 0;
  uint64_t recorder_prologue_ns = 0;
  uint64_t recorder_append_ns = 0;
  uint64_t flushes = 0;
  uint64_t writer_time_ns = 0;  // encoding and writing the buffered events, on any thread (trace.proto)
  uint64_t stalled_seals = 0;
  uint64_t clock_calibrations = 0;  // the preload's time-stamp counter scales (trace.proto); 0: clock_gettime
  uint64_t clock_max_error_ns = 0;
  uint64_t clock_steps = 0;
  uint64_t python_stacks = 0;
  uint64_t python_failures = 0;
  uint64_t memory_samples = 0;
  uint64_t cupti_only_events = 0;
  uint64_t allocator_events = 0;
  uint64_t allocator_ignored = 0;
  uint64_t dropped_frames = 0;
};

class TraceVisitor {
 public:
  virtual ~TraceVisitor() = default;
  virtual void OnHeader(const TraceHeader&) {}
  virtual void OnDevice(const DeviceInfo&) {}
  virtual void OnThread(const ThreadInfo&) {}   // again for a thread whose name changed
  virtual void OnModule(const ModuleInfo&) {}
  virtual void OnStackNode(const StackNode&) {}
  virtual void OnString(uint32_t /*id*/, const std::string& /*value*/) {}
  virtual void OnSymbol(const SymbolInfo&) {}
  virtual void OnPythonFrame(const PythonFrameInfo&) {}
  // Samples arrive in file order, not merged into the event order: after_seq places them.
  virtual void OnMemorySample(const MemorySample&) {}
  virtual void OnNotice(const NoticeInfo&) {}
  virtual void OnAllocatorAttach(const AllocatorAttachInfo&) {}
  // Phases arrive in file order, like samples: after_seq places them among the events.
  virtual void OnPhase(const PhaseInfo&) {}
  // In file order, like samples: after_seq places them among the events.
  virtual void OnGpuProcesses(const GpuProcessesInfo&) {}
  virtual void OnEvent(const Event&) {}
  // Events in chunks, in order, as the reader has them ready. The default hands them to OnEvent one by one;
  // visitors that can use the look-ahead (prefetching) override it. A visitor sees each event once either way.
  virtual void OnEvents(absl::Span<const Event> events) {
    for (const Event& e : events) OnEvent(e);
  }
  virtual void OnTrailer(const TrailerInfo&) {}
  // How far the reader has come: about every kReadProgressBytes of the file, in order with the other calls (the
  // events of the packets before `bytes_read` came first). `file_bytes` is the file's size when it was opened (0
  // when unknown). For progress bars; a trace's size says nothing else.
  virtual void OnReadProgress(uint64_t /*bytes_read*/, uint64_t /*file_bytes*/) {}
  // Where the visitor's calls are made on a second thread (delivery.h): called on the reader's thread while the
  // visitor's is behind and the reader would wait for it. A visitor with work that another thread may do (ScanPass:
  // PyTorch's allocator replay, layer_thread.h) does a piece of it and returns true; false when it has none now. It
  // runs while the visitor's other calls run on their thread: what it touches must be guarded.
  virtual bool HelpWhileReaderWaits() { return false; }
};

inline constexpr uint64_t kReadProgressBytes = uint64_t{1} << 20;

struct ReadStats {
  uint64_t bytes = 0;             // size of the file
  uint64_t packets = 0;
  uint64_t events = 0;
  bool truncated = false;         // the last packet was cut off
  uint64_t truncated_at = 0;      // byte offset of the cut-off packet
  bool has_trailer = false;
  uint64_t unknown_api_events = 0;  // events with an api this version does not know (skipped)
  // Event order (reorder_window.h): events processed after a later-numbered one (their order, and every number
  // computed from them, may be wrong), the largest distance by which one missed its place, and whether the trace's
  // batches carried low-water marks (exact order) or only the bounded window applied (older preloads).
  uint64_t late_events = 0;
  uint64_t max_lateness = 0;
  bool order_marked = false;
  // Damage (not a cut-off end): packets that could not be framed or parsed, the bytes skipped to find the next
  // packet that verifies, and the first such place and reason.
  uint64_t damaged_packets = 0;
  uint64_t skipped_bytes = 0;
  uint64_t first_damage_at = 0;
  std::string first_damage;
  // Compressed event batches (format 6's events_stream parts) that are intact but could not be inflated: an earlier
  // part of their zstd frame was in damaged bytes. Their events are missing.
  uint64_t undecodable_batches = 0;
  // The coarsest unit the events' times were written in (format 6's time_unit_ns, CUMEMTRACE_TIME_RESOLUTION):
  // 1 = nanoseconds.
  uint64_t time_unit_ns = 1;
  // The header was damaged and its copy (written by preloads since format version 3's header_copy) stood in for it:
  // the command line, host name and executable are unknown. header_copy_at is the copy's byte offset.
  bool header_recovered = false;
  uint64_t header_copy_at = 0;
};

// Reads `path` and feeds `visitor`. Returns an error for an empty file, a file that is not a cumemtrace trace or a
// trace of a newer format version. A damaged packet after the header costs that packet: the reader skips to the
// next packet that verifies and counts the damage in `stats`. A damaged header costs only its own fields when the
// trace holds a copy of it (header_copy packets): the copy stands in for it (`stats->header_recovered`).
//
// On a machine with more than one CPU (kAuto), the visitor's calls are made on a second thread while this one
// decodes (delivery.h); with five or more, batches' rows are also decoded on threads of their own (kDecodersToo,
// batch_decoders.h). The visitor sees the same metadata and events in the same order on one thread (events may come
// in chunks of other sizes), which tests compare. Every call has been made when ReadTrace returns.
enum class DeliveryThread { kAuto, kSame, kSecond, kDecodersToo };
absl::Status ReadTrace(const std::string& path, TraceVisitor& visitor, ReadStats* stats,
                       DeliveryThread thread = DeliveryThread::kAuto);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_READER_TRACE_READER_H_
