// The other processes on a GPU (preload/gpu_processes.cc), end to end with the fake driver and a fake NVML
// (tests/fakes/fake_nvml.cc): a failed allocation is followed by NVML's list of the device's processes, largest
// first, this process marked, command lines read only when the pids are this namespace's; NVML is loaded only when a
// list is wanted; and `cumem-analyze oom` names the other process.
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"

namespace cumemtrace::e2e {
namespace {

using analyzer::GpuProcessesInfo;

RunResult RunOom(std::vector<std::pair<std::string, std::string>> env) {
  RunOptions options;
  options.program = "torch_alloc";
  options.args = {"oom"};
  options.env = std::move(env);
  options.env.push_back({"CUMEMTRACE_PROCESS_SAMPLE_MS", "0"});  // lists at failures only
  return RunProgram(options);
}

std::string AnalyzeText(const std::vector<std::string>& args) { return RunAnalyzer(args); }

TEST(GpuProcesses, AFailedAllocationListsTheDevicesProcesses) {
  RunResult run = RunOom({{"FAKE_NVML_PROCESSES", "self:1048576,4242:5000000000,77:?"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  ASSERT_EQ(trace.gpu_processes.size(), 1u);
  const GpuProcessesInfo& list = trace.gpu_processes[0];
  EXPECT_EQ(list.reason, GpuProcessesInfo::Reason::kFailedAllocation);
  EXPECT_EQ(list.device, 0);
  EXPECT_EQ(list.pids, GpuProcessesInfo::Pids::kSame);
  EXPECT_EQ(list.error, "");
  // Placed right after the failed driver allocation.
  const analyzer::Event* failure = nullptr;
  for (const analyzer::Event& e : trace.events) {
    if (e.result != 0 && failure == nullptr) failure = &e;
  }
  ASSERT_NE(failure, nullptr);
  EXPECT_EQ(list.after_seq, failure->seq);
  ASSERT_EQ(list.processes.size(), 3u);
  EXPECT_EQ(list.processes[0].pid, 4242u);  // largest first
  EXPECT_EQ(list.processes[0].used_bytes, 5000000000u);
  EXPECT_FALSE(list.processes[0].self);
  EXPECT_EQ(list.processes[1].pid, static_cast<uint32_t>(run.pid));
  EXPECT_TRUE(list.processes[1].self);
  EXPECT_EQ(list.processes[1].used_bytes, 1048576u);
  EXPECT_NE(list.processes[1].command.find("e2e_torch_alloc oom"), std::string::npos) << list.processes[1].command;
  EXPECT_EQ(list.processes[2].pid, 77u);
  EXPECT_TRUE(list.processes[2].used_unknown);

  const std::string text = AnalyzeText({"oom", run.trace_path});
  const size_t line = text.find("Other processes on device 0 at the failure: pid 4242 4.7 GiB, pid 77 ");
  ASSERT_NE(line, std::string::npos) << text;
  const std::string others = text.substr(line, text.find('\n', line) - line);
  EXPECT_EQ(others.find(absl::StrCat("pid ", run.pid)), std::string::npos) << "names itself: " << others;
  RemoveRunDir(run);
}

// Inside a container NVML names processes by the host's pids: this process is not among them, so /proc here says
// nothing about them.
TEST(GpuProcesses, PidsOfAnotherNamespaceGetNoCommandLines) {
  RunResult run = RunOom({{"FAKE_NVML_PROCESSES", "4242:5000000000,1:1048576"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_EQ(trace.gpu_processes.size(), 1u);
  const GpuProcessesInfo& list = trace.gpu_processes[0];
  EXPECT_EQ(list.pids, GpuProcessesInfo::Pids::kOtherNamespace);
  ASSERT_EQ(list.processes.size(), 2u);
  for (const analyzer::GpuProcessInfo& p : list.processes) {
    EXPECT_EQ(p.command, "") << p.pid;  // pid 1 exists here, but is not NVML's pid 1
    EXPECT_FALSE(p.self);
  }
  const std::string text = AnalyzeText({"oom", run.trace_path});
  EXPECT_NE(text.find("pids as the host sees them"), std::string::npos) << text;
  RemoveRunDir(run);
}

TEST(GpuProcesses, WhenNvmlFailsTheListSaysWhy) {
  RunResult run = RunOom({{"FAKE_NVML_INIT_FAIL", "1"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_EQ(trace.gpu_processes.size(), 1u);
  EXPECT_EQ(trace.gpu_processes[0].error, "nvmlInit failed: Driver Not Loaded");
  EXPECT_TRUE(trace.gpu_processes[0].processes.empty());
  const std::string text = AnalyzeText({"oom", run.trace_path});
  EXPECT_NE(text.find("Other processes on device 0: unknown (nvmlInit failed: Driver Not Loaded)"),
            std::string::npos)
      << text;
  RemoveRunDir(run);
}

// More processes than the preload's buffer: NVML answers with the count only, and the list says so.
TEST(GpuProcesses, MoreProcessesThanTheBufferAreSaidNotListed) {
  std::string many = "self:1048576";
  for (int i = 0; i < 70; ++i) many += "," + std::to_string(5000 + i) + ":1048576";
  RunResult run = RunOom({{"FAKE_NVML_PROCESSES", many}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_EQ(trace.gpu_processes.size(), 1u);
  EXPECT_EQ(trace.gpu_processes[0].error, "more than 64 processes on the device: not listed");
  EXPECT_TRUE(trace.gpu_processes[0].processes.empty());
  RemoveRunDir(run);
}

// A run without a failure and without periodic lists never loads NVML.
TEST(GpuProcesses, NvmlIsLoadedOnlyWhenAListIsWanted) {
  RunOptions options;
  options.program = "torch_alloc";
  options.args = {"basic"};
  options.env = {{"CUMEMTRACE_PROCESS_SAMPLE_MS", "0"}, {"FAKE_NVML_LOG", "nvml.log"}};
  RunResult run = RunProgram(options);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  EXPECT_FALSE(std::ifstream(run.dir + "/nvml.log").good());
  CollectedTrace trace = CollectTrace(run.trace_path);
  EXPECT_TRUE(trace.gpu_processes.empty());
  RemoveRunDir(run);
}

// Periodic lists come from the flush thread, about every CUMEMTRACE_PROCESS_SAMPLE_MS, once a device is in use.
TEST(GpuProcesses, PeriodicListsComeWhileTheProgramRuns) {
  RunOptions options;
  options.program = "paced";
  options.env = {{"CUMEMTRACE_PROCESS_SAMPLE_MS", "20"}, {"CUMEMTRACE_FLUSH_MS", "10"},
                 {"FAKE_NVML_PROCESSES", "self:1048576"}};
  RunResult run = RunProgram(options);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  ASSERT_GE(trace.gpu_processes.size(), 3u);  // the program runs 400 ms
  for (const GpuProcessesInfo& list : trace.gpu_processes) {
    EXPECT_EQ(list.reason, GpuProcessesInfo::Reason::kSample);
    ASSERT_EQ(list.processes.size(), 1u);
    EXPECT_TRUE(list.processes[0].self);
  }
  RemoveRunDir(run);
}

}  // namespace
}  // namespace cumemtrace::e2e
