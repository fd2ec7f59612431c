// Helpers of the end-to-end tests (see the header): running programs, reading the ledger, collecting traces, keys.
#include "e2e_support.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "analyzer/commands/run_cli.h"
#include "proto/format.h"

#ifndef E2E_PRELOAD
#error "E2E_PRELOAD (path of libcumemtrace.so) must be defined by the build"
#endif
#ifndef E2E_FAKE_CUDA_DIR
#error "E2E_FAKE_CUDA_DIR (folder of the fake libcuda.so.1 and libcudart.so.13) must be defined by the build"
#endif
#ifndef E2E_PROGRAM_DIR
#error "E2E_PROGRAM_DIR (folder of the e2e_* programs) must be defined by the build"
#endif

namespace cumemtrace::e2e {
namespace {

using analyzer::Event;
using format::ApiInfo;
using format::Kind;
using format::Op;

std::string Hex(uint64_t value) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%" PRIx64, value);
  return buf;
}

std::string ReadFileTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  return text;
}

const ApiInfo* FindApiByName(const std::string& name) {
  for (const ApiInfo& info : format::kApiTable) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

bool IsDeviceSideKind(Kind kind) { return kind == Kind::kDevice || kind == Kind::kManaged || kind == Kind::kPool; }

bool ParseUnsigned(const std::string& text, int base, uint64_t* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *value = strtoull(text.c_str(), &end, base);
  return errno == 0 && end != nullptr && *end == '\0';
}

bool ParseInt(const std::string& text, int* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long parsed = strtol(text.c_str(), &end, 10);
  *value = static_cast<int>(parsed);
  return errno == 0 && end != nullptr && *end == '\0';
}

absl::Status ParseLedgerLine(const std::string& line, LedgerEntry* entry) {
  std::istringstream in(line);
  std::string address, size, result;
  if (!(in >> entry->op >> entry->api >> address >> size >> result) ||
      (entry->op != "alloc" && entry->op != "free") || !ParseUnsigned(address, 16, &entry->address) ||
      !ParseUnsigned(size, 10, &entry->size) || !ParseInt(result, &entry->result)) {
    return absl::InvalidArgumentError("malformed ledger line: " + line);
  }
  entry->line = line;
  bool has_pid = false, has_tid = false, has_dev = false;
  for (std::string field; in >> field;) {
    const size_t eq = field.find('=');
    if (eq == std::string::npos) return absl::InvalidArgumentError("malformed ledger field in: " + line);
    const std::string key = field.substr(0, eq);
    const std::string value = field.substr(eq + 1);
    bool ok = true;
    if (key == "pid") {
      ok = has_pid = ParseInt(value, &entry->pid);
    } else if (key == "tid") {
      ok = has_tid = ParseInt(value, &entry->tid);
    } else if (key == "dev") {
      ok = has_dev = ParseInt(value, &entry->device);
    } else if (key == "stream") {
      ok = entry->has_stream = ParseUnsigned(value, 16, &entry->stream);
    } else if (key == "aux") {
      ok = entry->has_aux = ParseUnsigned(value, 16, &entry->aux);
    } else if (key == "free") {
      ok = entry->has_mem_info = ParseUnsigned(value, 10, &entry->free_bytes);
    } else if (key == "total") {
      ok = ParseUnsigned(value, 10, &entry->total_bytes);
    } else if (key == "via") {
      entry->via = value;
    } else {
      ok = false;
    }
    if (!ok) return absl::InvalidArgumentError("bad ledger field '" + field + "' in: " + line);
  }
  if (!has_pid || !has_tid || !has_dev) return absl::InvalidArgumentError("ledger line without pid/tid/dev: " + line);
  return absl::OkStatus();
}

class Collector : public analyzer::TraceVisitor {
 public:
  explicit Collector(CollectedTrace* trace) : trace_(trace) {}
  void OnHeader(const analyzer::TraceHeader& header) override {
    trace_->has_header = true;
    trace_->header = header;
  }
  void OnDevice(const analyzer::DeviceInfo& device) override { trace_->devices.push_back(device); }
  void OnThread(const analyzer::ThreadInfo& thread) override { trace_->threads[thread.index] = thread; }
  void OnModule(const analyzer::ModuleInfo& module) override { trace_->modules.push_back(module); }
  void OnStackNode(const analyzer::StackNode& node) override { trace_->stack_nodes[node.id] = node; }
  void OnEvent(const Event& event) override { trace_->events.push_back(event); }
  void OnString(uint32_t id, const std::string& value) override { trace_->strings[id] = value; }
  void OnPythonFrame(const analyzer::PythonFrameInfo& frame) override { trace_->python_frames[frame.id] = frame; }
  void OnMemorySample(const analyzer::MemorySample& sample) override { trace_->samples.push_back(sample); }
  void OnNotice(const analyzer::NoticeInfo& notice) override { trace_->notices.push_back(notice); }
  void OnGpuProcesses(const analyzer::GpuProcessesInfo& list) override { trace_->gpu_processes.push_back(list); }
  void OnAllocatorAttach(const analyzer::AllocatorAttachInfo& attach) override {
    trace_->allocator_attaches.push_back(attach);
  }
  void OnTrailer(const analyzer::TrailerInfo& trailer) override {
    trace_->has_trailer = true;
    trace_->trailer = trailer;
  }

 private:
  CollectedTrace* trace_;
};

}  // namespace

std::string ProgramPath(const std::string& program) { return std::string(E2E_PROGRAM_DIR) + "/e2e_" + program; }

RunResult RunProgram(const RunOptions& options) {
  RunResult run;
  std::string pattern = testing::TempDir() + "cumemtrace_e2e_" + options.program + "_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp(" << pattern << "): " << strerror(errno);
    return run;
  }
  run.dir = pattern;
  run.ledger_path = run.dir + "/ledger.txt";

  std::map<std::string, std::string> env = {
      {"PATH", "/usr/bin:/bin"},
      {"LD_LIBRARY_PATH", E2E_FAKE_CUDA_DIR},
      {"FAKE_CUDA_LEDGER", run.ledger_path},
      {"FAKE_CUDA_TOTAL_BYTES", std::to_string(kFakeTotalBytes)},
      {"FAKE_CUDA_FAIL_ABOVE", std::to_string(kFakeFailAbove)},
      {"CUMEMTRACE_OUTPUT", run.dir + "/trace.%p.pb"},
      // Tests that count stderr lines see only warnings; e2e_exit_notice_test.cc turns the "wrote" line back on.
      {"CUMEMTRACE_QUIET", "1"},
  };
  if (options.preload) env["LD_PRELOAD"] = E2E_PRELOAD;
  for (const auto& [key, value] : options.env) env[key] = value;
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : env) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string path = options.program_path.empty() ? ProgramPath(options.program) : options.program_path;
  std::vector<std::string> arg_strings = options.args;
  std::vector<char*> argv = {path.data()};
  for (std::string& arg : arg_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::string out_path = run.dir + "/stdout.txt";
  const std::string err_path = run.dir + "/stderr.txt";

  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << strerror(errno);
    return run;
  }
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || chdir(run.dir.c_str()) != 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  run.pid = pid;
  run.trace_path = run.dir + "/trace." + std::to_string(pid) + ".pb";
  int status = 0;
  const std::string kill_after = options.kill_after_file.empty() ? "" : run.dir + "/" + options.kill_after_file;
  int kill_at_ms = -1;
  for (int waited_ms = 0;; waited_ms += 10) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (kill_at_ms < 0 && !kill_after.empty() && access(kill_after.c_str(), F_OK) == 0) {
      kill_at_ms = waited_ms + options.kill_delay_ms;
    }
    if (kill_at_ms >= 0 && waited_ms >= kill_at_ms) kill(pid, SIGKILL);
    if (waited_ms >= options.timeout_s * 1000) {
      run.timed_out = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    usleep(10 * 1000);
  }
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.term_signal = WTERMSIG(status);
  return run;
}

void RemoveRunDir(const RunResult& run) {
  if (run.dir.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(run.dir, ignored);
}

std::string RunResult::Describe() const {
  std::ostringstream out;
  out << "run in " << dir << ": pid " << pid;
  if (timed_out) out << ", timed out";
  if (term_signal != 0) out << ", killed by signal " << term_signal << " (" << strsignal(term_signal) << ")";
  if (term_signal == 0 && !timed_out) out << ", exit code " << exit_code;
  out << "\nfiles:";
  std::error_code ignored;
  for (const auto& file : std::filesystem::directory_iterator(dir, ignored)) {
    out << " " << file.path().filename().string() << " (" << std::filesystem::file_size(file.path(), ignored)
        << " bytes)";
  }
  const std::string err = ReadFileTail(dir + "/stderr.txt", 3000);
  if (!err.empty()) out << "\nstderr:\n" << err;
  return out.str();
}

absl::Status ReadLedger(const std::string& path, std::vector<LedgerEntry>* entries) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("no ledger at " + path);
  entries->clear();
  for (std::string line; std::getline(in, line);) {
    LedgerEntry entry;
    const absl::Status status = ParseLedgerLine(line, &entry);
    if (!status.ok()) return status;
    entries->push_back(std::move(entry));
  }
  return absl::OkStatus();
}

std::vector<LedgerEntry> EntriesOfPid(const std::vector<LedgerEntry>& entries, int pid) {
  std::vector<LedgerEntry> out;
  std::copy_if(entries.begin(), entries.end(), std::back_inserter(out),
               [pid](const LedgerEntry& e) { return e.pid == pid; });
  return out;
}

std::string ExpectedApiName(const LedgerEntry& entry) {
  if (!entry.via.empty()) return entry.via;
  std::string name = entry.api;
  for (const char* suffix : {"_ptsz", "_v2"}) {
    const size_t n = strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) name.resize(name.size() - n);
  }
  return name;
}

absl::Status CollectedTrace::StackPcs(uint64_t stack, std::vector<uint64_t>* pcs) const {
  pcs->clear();
  if (stack == 0) return absl::NotFoundError("no stack (id 0)");
  for (uint64_t id = stack; id != 0;) {
    auto it = stack_nodes.find(id);
    if (it == stack_nodes.end()) return absl::NotFoundError("stack node " + std::to_string(id) + " never delivered");
    pcs->push_back(it->second.pc);
    if (pcs->size() > 100000) return absl::DataLossError("stack chain does not end at the root");
    id = it->second.parent;
  }
  return absl::OkStatus();
}

int CollectedTrace::Tid(const Event& event) const {
  auto it = threads.find(event.thread);
  return it == threads.end() ? -1 : it->second.tid;
}

CollectedTrace CollectTrace(const std::string& path) {
  CollectedTrace trace;
  Collector collector(&trace);
  trace.status = analyzer::ReadTrace(path, collector, &trace.stats);
  return trace;
}

namespace {

std::string BasicKey(const std::string& op, const std::string& api, uint64_t address, uint64_t size, int result) {
  return op + " " + api + " " + Hex(address) + " " + std::to_string(size) + " " + std::to_string(result);
}

}  // namespace

std::string LedgerKey(const LedgerEntry& entry, bool full) {
  const std::string api = ExpectedApiName(entry);
  std::string key = BasicKey(entry.op, api, entry.address, entry.size, entry.result);
  if (!full) return key;
  key += " tid=" + std::to_string(entry.tid);
  const ApiInfo* info = FindApiByName(api);
  if (info == nullptr) return key + " (api not in format.h)";
  if (info->op == Op::kAlloc && IsDeviceSideKind(info->kind)) key += " dev=" + std::to_string(entry.device);
  if (info->has_stream) key += " stream=" + (entry.has_stream ? Hex(entry.stream) : std::string("?"));
  if (info->has_aux) key += " aux=" + (entry.has_aux ? Hex(entry.aux) : std::string("?"));
  return key;
}

std::string EventKey(const CollectedTrace& trace, const Event& event, bool full) {
  if (event.info == nullptr) return "event without api info, api " + std::to_string(static_cast<int>(event.api));
  const bool alloc = event.info->op == Op::kAlloc;
  std::string key = BasicKey(alloc ? "alloc" : "free", event.info->name, event.address, alloc ? event.size : 0,
                             event.result);
  if (!full) return key;
  key += " tid=" + std::to_string(trace.Tid(event));
  if (alloc && IsDeviceSideKind(event.info->kind)) key += " dev=" + std::to_string(event.device);
  if (event.info->has_stream) key += " stream=" + Hex(event.stream);
  if (event.info->has_aux) key += " aux=" + Hex(event.aux);
  return key;
}

std::vector<std::string> LedgerKeys(const std::vector<LedgerEntry>& entries, bool full) {
  std::vector<std::string> keys;
  for (const LedgerEntry& entry : entries) keys.push_back(LedgerKey(entry, full));
  return keys;
}

std::vector<std::string> EventKeys(const CollectedTrace& trace, bool full) {
  std::vector<std::string> keys;
  for (const Event& event : trace.events) keys.push_back(EventKey(trace, event, full));
  return keys;
}

std::string MultisetDifference(std::vector<std::string> expected, std::vector<std::string> actual) {
  std::sort(expected.begin(), expected.end());
  std::sort(actual.begin(), actual.end());
  std::vector<std::string> missing, extra;
  std::set_difference(expected.begin(), expected.end(), actual.begin(), actual.end(), std::back_inserter(missing));
  std::set_difference(actual.begin(), actual.end(), expected.begin(), expected.end(), std::back_inserter(extra));
  if (missing.empty() && extra.empty()) return "";
  constexpr size_t kShown = 25;
  std::ostringstream out;
  out << expected.size() << " expected, " << actual.size() << " in the trace; " << missing.size()
      << " missing from the trace, " << extra.size() << " extra in the trace";
  for (const auto& [title, keys] : {std::pair{"missing", &missing}, std::pair{"extra", &extra}}) {
    for (size_t i = 0; i < keys->size() && i < kShown; ++i) out << "\n  " << title << ": " << (*keys)[i];
    if (keys->size() > kShown) out << "\n  ... " << keys->size() - kShown << " more " << title;
  }
  return out.str();
}

std::vector<std::string> CanonicalLedger(const std::vector<LedgerEntry>& entries) {
  std::map<uint64_t, int> names;
  auto name = [&names](const char* prefix, uint64_t value) {
    auto [it, inserted] = names.emplace(value, static_cast<int>(names.size()));
    return prefix + std::to_string(it->second);
  };
  std::vector<std::string> out;
  const int parent = entries.empty() ? 0 : entries.front().pid;
  for (const LedgerEntry& e : entries) {
    std::string line = std::string(e.pid == parent ? "parent " : "child ") + e.op + " " + e.api + " " +
                       name("A", e.address) + " " + std::to_string(e.size) + " " + std::to_string(e.result) +
                       " dev=" + std::to_string(e.device);
    if (e.has_stream) line += " stream=" + name("S", e.stream);
    if (e.has_aux) line += " aux=" + Hex(e.aux);
    if (e.has_mem_info) line += " free=" + std::to_string(e.free_bytes) + " total=" + std::to_string(e.total_bytes);
    if (!e.via.empty()) line += " via=" + e.via;
    out.push_back(line);
  }
  return out;
}

std::vector<std::string> UnorderedLedger(const std::vector<LedgerEntry>& entries) {
  std::vector<std::string> out;
  for (const LedgerEntry& e : entries) {
    out.push_back(e.op + " " + e.api + " " + std::to_string(e.size) + " " + std::to_string(e.result) +
                  " dev=" + std::to_string(e.device) + (e.via.empty() ? "" : " via=" + e.via));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string RunAnalyzer(const std::vector<std::string>& args, std::string* err_text) {
  FILE* out = tmpfile();
  FILE* err = tmpfile();
  analyzer::RunCli(args, out, err);
  auto slurp = [](FILE* f) {
    std::string text;
    rewind(f);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
    fclose(f);
    return text;
  };
  std::string err_output = slurp(err);
  if (err_text != nullptr) *err_text = std::move(err_output);
  return slurp(out);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint64_t Varint(const std::string& b, size_t* pos) {
  uint64_t value = 0;
  for (int shift = 0; *pos < b.size() && shift < 64; shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(b[(*pos)++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) break;
  }
  return value;
}

std::vector<FramedPacket> Packets(const std::string& b) {
  std::vector<FramedPacket> packets;
  size_t pos = 0;
  while (pos < b.size() && static_cast<uint8_t>(b[pos]) == 0x0a) {
    FramedPacket p;
    p.start = pos++;
    const uint64_t length = Varint(b, &pos);
    size_t body = pos;
    p.field = static_cast<uint32_t>(Varint(b, &body) >> 3);
    pos += length;
    p.bytes = pos - p.start;
    packets.push_back(p);
  }
  EXPECT_EQ(pos, b.size()) << "the file is not whole packets";
  return packets;
}

std::string WriteDamaged(const RunResult& run, const std::string& name, const std::string& bytes) {
  const std::string path = run.dir + "/" + name;
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace cumemtrace::e2e
