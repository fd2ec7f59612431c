// Test helper: builds cumemtrace trace files with protoc's generated classes, packet by packet, encoding event
// batches by the column rules of trace.proto (constant columns written once, per-api columns only for the rows
// that have them, failures by row). Tests describe events as plain rows and assert what the analyzer makes of them.
#ifndef CUMEMTRACE_TESTS_UNIT_ANALYZER_TRACE_BUILDER_H_
#define CUMEMTRACE_TESTS_UNIT_ANALYZER_TRACE_BUILDER_H_

#include <cstdint>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "proto/format.h"
#include "proto/trace.pb.h"

namespace cumemtrace::analyzer::test {

inline constexpr int64_t kStartNs = 1'000'000'000;          // header start_time_ns of built traces
inline constexpr int64_t kStartUnixNs = 1'763'776'323'000'000'000;  // 2025-11-22 01:52:03 UTC

struct Ev {
  uint64_t seq = 0;
  int64_t time_ns = 0;  // absolute (trace clock); kStartNs + offset
  format::Api api = format::Api::kCudaMalloc;
  int32_t device = 0;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
  uint64_t aux = 0;
  uint64_t stack = 0;
  uint32_t thread = 0;
  int32_t result = 0;
  bool has_mem_info = false;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// Shorthands: an allocation / free at `t_ms` milliseconds after the start.
Ev Alloc(uint64_t seq, double t_ms, uint64_t address, uint64_t size, uint64_t stack = 0,
         format::Api api = format::Api::kCudaMalloc, int32_t device = 0, uint32_t thread = 0);
Ev Free(uint64_t seq, double t_ms, uint64_t address, format::Api api = format::Api::kCudaFree, int32_t device = 0,
        uint32_t thread = 0);

// PyTorch's caching allocator (TORCH_* apis): an event of `api` at `t_ms`; `size` is written only for the apis
// that have a size (ALLOC: bytes requested; SEGMENT_*: segment bytes; OOM: the rounded request, `aux` = free bytes).
Ev Torch(uint64_t seq, double t_ms, format::Api api, uint64_t address, uint64_t size = 0, uint64_t stack = 0,
         int32_t device = 0, uint64_t aux = 0);

struct EncodeOptions {
  bool per_row_columns = false;  // write thread/device/stack once per row even when constant
  bool explicit_seq = false;     // write seq_delta even when seqs are consecutive
};

class TraceBuilder {
 public:
  // A header with the magic, format version 1 and test values (pid 4242, argv "python train.py", ...).
  static format::Header DefaultHeader();

  TraceBuilder& Header() { return Header(DefaultHeader()); }
  TraceBuilder& Header(const format::Header& header);
  TraceBuilder& Device(int32_t ordinal, const std::string& name, uint64_t total_memory);
  TraceBuilder& Thread(uint32_t index, int32_t tid, const std::string& name);
  TraceBuilder& Module(uint32_t id, const std::string& path, uint64_t load_bias, uint64_t start, uint64_t end);
  TraceBuilder& StackNodes(uint64_t first_id, const std::vector<uint64_t>& parents, const std::vector<uint64_t>& pcs);
  TraceBuilder& Strings(uint32_t first_id, const std::vector<std::string>& values);
  // One symbol per pc: function string id, module id, offset.
  TraceBuilder& Symbols(const std::vector<uint64_t>& pcs, const std::vector<uint32_t>& functions,
                        const std::vector<uint32_t>& modules, const std::vector<uint64_t>& offsets);
  // Symbols with source file and line (string ids) per pc.
  TraceBuilder& SymbolsWithLines(const std::vector<uint64_t>& pcs, const std::vector<uint32_t>& functions,
                                 const std::vector<uint32_t>& modules, const std::vector<uint64_t>& offsets,
                                 const std::vector<uint32_t>& files, const std::vector<uint32_t>& lines);
  // Python frames first_id, first_id + 1, ...: function, file (string ids) and line each.
  TraceBuilder& PythonFrames(uint32_t first_id, const std::vector<uint32_t>& functions,
                             const std::vector<uint32_t>& files, const std::vector<uint32_t>& lines);
  // Interns the stack `pcs` (innermost first; PyPc(id) for Python frames, PyPc(0) for the "no Python frames"
  // marker) as the preload does, writing a StackNodes packet for the nodes not seen before; returns its id.
  uint64_t Stack(const std::vector<uint64_t>& pcs);
  TraceBuilder& Events(const std::vector<Ev>& events, const EncodeOptions& options = {});
  TraceBuilder& Batch(const format::EventBatch& batch);
  TraceBuilder& Trailer(uint64_t events, int64_t end_time_ns);
  TraceBuilder& Packet(const format::Packet& packet);
  TraceBuilder& Raw(const std::string& bytes);

  // Offset at which the next packet will start.
  size_t size() const { return bytes_.size(); }
  const std::string& bytes() const { return bytes_; }
  // Writes the trace to a fresh file under the test temp directory; returns its path.
  std::string Write(const std::string& name) const;

  static format::EventBatch Encode(const std::vector<Ev>& events, const EncodeOptions& options = {});

  // --- Owners, driver samples and ranks ---
  // DefaultHeader() with rank fields, pid, host name and executable set (rank fields < 0 are left unset).
  static format::Header RankHeader(int32_t rank, int32_t local_rank, int32_t world_size, int32_t pid,
                                   const std::string& hostname, const std::string& executable = "/usr/bin/python3");
  // Module `id` at [ModuleBase(id), ModuleBase(id) + 0x10000), load bias = its start.
  TraceBuilder& NamedModule(uint32_t id, const std::string& path);
  static uint64_t ModuleBase(uint32_t id) { return uint64_t{0x10000000} + uint64_t{id} * 0x100000; }
  // A pc inside NamedModule `id`.
  static uint64_t PcIn(uint32_t id, uint64_t offset = 0x40) { return ModuleBase(id) + offset; }
  // A chain of stack nodes first_id, first_id + 1, ... holding `pcs` given innermost first; returns the innermost
  // node's id (the stack id events carry) in `*leaf`.
  TraceBuilder& Stack(uint64_t first_id, const std::vector<uint64_t>& pcs_innermost_first, uint64_t* leaf);
  // PyTorch's caching allocator reached (trace.proto's AllocatorAttach).
  TraceBuilder& AllocatorAttach(uint64_t after_seq, const std::string& config, bool at_first_segment,
                                const std::string& library = "/site-packages/torch/lib/libc10_cuda.so");
  TraceBuilder& MemorySample(int32_t device, uint64_t free_bytes, uint64_t total_bytes, uint64_t after_seq,
                             int64_t time_ns = kStartNs);

 private:
  std::string bytes_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> nodes_;  // (parent, pc) -> id, for Stack()
  uint64_t next_node_ = 1;
};

// The stack node pc naming Python frame `id` (0: the "no Python frames on this thread" marker).
inline constexpr uint64_t PyPc(uint64_t id) { return format::PcOfPythonFrameId(id); }

// One packet framed as Trace.packet (tag 0x0a, varint length, bytes).
std::string Frame(const format::Packet& packet);
std::string Varint(uint64_t value);
// Writes `bytes` to a fresh file under the test temp directory; returns its path. The file is removed when the test
// process ends, unless a test failed.
std::string WriteTempFile(const std::string& name, const std::string& bytes);

}  // namespace cumemtrace::analyzer::test

#endif  // CUMEMTRACE_TESTS_UNIT_ANALYZER_TRACE_BUILDER_H_
