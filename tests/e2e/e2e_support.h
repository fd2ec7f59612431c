// Helpers of the end-to-end tests: run a test program in a child process with a controlled environment (with or
// without the preload, against the fake CUDA libraries), read the fake driver's ledger (the oracle), collect a trace
// through the analyzer's reader, and turn both into comparable keys.
//
// Why this exists: every e2e test does these steps; keeping them here keeps the tests about what they check. The
// helpers never interpret the trace beyond what trace_reader.h delivers, and never trust the preload: expected
// values come from the ledger, which the fake driver writes on its own.
#ifndef CUMEMTRACE_TESTS_E2E_E2E_SUPPORT_H_
#define CUMEMTRACE_TESTS_E2E_E2E_SUPPORT_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::e2e {

inline constexpr uint64_t kFakeTotalBytes = 16ull << 30;  // FAKE_CUDA_TOTAL_BYTES of every run
inline constexpr uint64_t kFakeFailAbove = 128ull << 20;  // FAKE_CUDA_FAIL_ABOVE: plants the programs' failure

struct RunOptions {
  std::string program;  // e.g. "direct": the binary e2e_direct
  bool preload = true;  // LD_PRELOAD=libcumemtrace.so
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing) the default environment
  int timeout_s = 120;
  // When not empty: once the program has created this file (relative to its working folder, the run's folder),
  // wait kill_delay_ms more and end it with SIGKILL.
  std::string kill_after_file;
  int kill_delay_ms = 0;
  std::string program_path;       // when set: the file to run (argv[0]) instead of ProgramPath(program)
  std::vector<std::string> args;  // argv[1...]
};

struct RunResult {
  std::string dir;          // the run's own folder: ledger, traces, stdout, stderr
  pid_t pid = -1;           // of the program
  int exit_code = -1;       // when it exited
  int term_signal = 0;      // when a signal ended it
  bool timed_out = false;
  std::string ledger_path;  // <dir>/ledger.txt
  std::string trace_path;   // <dir>/trace.<pid>.pb (CUMEMTRACE_OUTPUT=<dir>/trace.%p.pb)

  // Exit status, the end of stderr and the folder's files, for failure messages.
  std::string Describe() const;
};

std::string ProgramPath(const std::string& program);

// Runs the program (fork + execve with only the environment described in the .cc) and waits for it.
RunResult RunProgram(const RunOptions& options);

// Removes a run's folder.
void RemoveRunDir(const RunResult& run);

struct LedgerEntry {
  std::string op;   // alloc | free
  std::string api;  // exported driver function, e.g. cuMemAllocAsync_ptsz
  uint64_t address = 0;
  uint64_t size = 0;
  int result = 0;
  int pid = 0;
  int tid = 0;
  int device = 0;
  bool has_stream = false;
  uint64_t stream = 0;
  bool has_aux = false;
  uint64_t aux = 0;
  bool has_mem_info = false;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  std::string via;  // runtime call that made it, "" for none
  std::string line;
};

// Reads and parses the ledger; a malformed line is an error.
absl::Status ReadLedger(const std::string& path, std::vector<LedgerEntry>* entries);

std::vector<LedgerEntry> EntriesOfPid(const std::vector<LedgerEntry>& entries, int pid);

// The api a trace event for this ledger entry must carry: the runtime label when the runtime made the call, else
// the driver function's base name (without _v2 / _ptsz), as spelled in format.h's api table.
std::string ExpectedApiName(const LedgerEntry& entry);

// Everything ReadTrace delivered, in delivery order.
struct CollectedTrace {
  absl::Status status;
  analyzer::ReadStats stats;
  bool has_header = false;
  analyzer::TraceHeader header;
  std::vector<analyzer::DeviceInfo> devices;
  std::map<uint32_t, analyzer::ThreadInfo> threads;  // by index, the latest delivered
  std::vector<analyzer::ModuleInfo> modules;
  std::map<uint64_t, analyzer::StackNode> stack_nodes;
  std::vector<analyzer::Event> events;
  std::map<uint32_t, std::string> strings;
  std::map<uint64_t, analyzer::PythonFrameInfo> python_frames;
  std::vector<analyzer::MemorySample> samples;
  std::vector<analyzer::NoticeInfo> notices;
  std::vector<analyzer::AllocatorAttachInfo> allocator_attaches;
  std::vector<analyzer::GpuProcessesInfo> gpu_processes;
  bool has_trailer = false;
  analyzer::TrailerInfo trailer;

  // pcs of the stack whose innermost node is `stack` (innermost first); an error for an id that is 0, unknown, or
  // a chain that does not end at the root.
  absl::Status StackPcs(uint64_t stack, std::vector<uint64_t>* pcs) const;
  // tid of the event's thread, -1 when no thread with that index was delivered.
  int Tid(const analyzer::Event& event) const;
};

CollectedTrace CollectTrace(const std::string& path);

// Runs cumem-analyze with `args` in this process; returns its stdout (its stderr in *err_text when given).
std::string RunAnalyzer(const std::vector<std::string>& args, std::string* err_text = nullptr);

// Keys that compare a ledger entry with a trace event. The basic key is "<op> <api> 0x<address> <size> <result>";
// the full key adds the thread, the device (allocations of device, managed and pool memory), the stream (apis with
// a stream) and cuMemMap's handle.
std::string LedgerKey(const LedgerEntry& entry, bool full);
std::string EventKey(const CollectedTrace& trace, const analyzer::Event& event, bool full);
std::vector<std::string> LedgerKeys(const std::vector<LedgerEntry>& entries, bool full);
std::vector<std::string> EventKeys(const CollectedTrace& trace, bool full);

// "" when `expected` and `actual` hold the same keys as multisets; otherwise what is missing and what is extra.
std::string MultisetDifference(std::vector<std::string> expected, std::vector<std::string> actual);

// The ledger as a sequence that two runs of a single-threaded program must share: addresses renamed by order of
// first appearance (host addresses move with ASLR), pids as parent/child, tids dropped.
std::vector<std::string> CanonicalLedger(const std::vector<LedgerEntry>& entries);

// The ledger as a sorted multiset without addresses, threads and pids: what two runs of a multi-threaded program
// must share (which address a thread gets depends on how the threads interleave).
std::vector<std::string> UnorderedLedger(const std::vector<LedgerEntry>& entries);

// The whole file at `path` ("" when it cannot be read).
std::string Slurp(const std::string& path);

// A packet of a trace file: where it starts, how many bytes it takes with its framing, and which Packet field it
// holds.
struct FramedPacket {
  size_t start = 0;
  size_t bytes = 0;
  uint32_t field = 0;
};
// The packets of a whole trace file (a test failure when it is not whole packets).
std::vector<FramedPacket> Packets(const std::string& bytes);
// A protobuf varint at *pos, which moves past it.
uint64_t Varint(const std::string& bytes, size_t* pos);

// Writes `bytes` as `name` in the run's folder (removed with it); returns the path.
std::string WriteDamaged(const RunResult& run, const std::string& name, const std::string& bytes);

}  // namespace cumemtrace::e2e

#endif  // CUMEMTRACE_TESTS_E2E_E2E_SUPPORT_H_
