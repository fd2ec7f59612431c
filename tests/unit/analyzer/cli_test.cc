// The tool end to end, in-process through RunCli: exit codes, the one-line errors and warnings, and every report
// in JSON (checked value by value against the scenario's hand-worked numbers) and in text.
#include "analyzer/commands/run_cli.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "proto/format.h"
#include "analyzer/commands/oom_replays.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/json_value.h"
#include "tests/unit/analyzer/scenario.h"

namespace cumemtrace::analyzer::test {
namespace {


std::vector<std::string> Functions(const JsonValue& stack) {
  std::vector<std::string> out;
  for (const JsonValue& f : stack.array()) out.push_back(f["function"].str());
  return out;
}

class Cli : public ::testing::Test {
 protected:
  // Named per process: ctest runs each test as its own process, in parallel, and each sets the suite up.
  static void SetUpTestSuite() {
    path_ = new std::string(WriteScenario("cli_scenario_" + std::to_string(getpid()) + ".pb"));
  }
  static const std::string& path() { return *path_; }
  static std::string* path_;
};
std::string* Cli::path_ = nullptr;

TEST_F(Cli, UsageErrorsExit2WithOneLine) {
  ToolResult r = Tool({});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "cumem-analyze: missing the trace file (see cumem-analyze --help)\n");
  EXPECT_EQ(r.out, "");
  r = Tool({"frobnicate", path()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "cumem-analyze: unknown subcommand 'frobnicate' (one of: summary, peak, leaks, pinned, oom, whatif, events, "
            "ranks, symbolize, redact, check, diff, folded, html, pprof, perfetto, torch-snapshot) (see "
            "cumem-analyze --help)\n");
}

TEST_F(Cli, HelpAndVersion) {
  ToolResult r = Tool({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("usage: cumem-analyze [subcommand] TRACE.pb", 0), 0u);
  r = Tool({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find(absl::StrCat("reads trace format versions up to ", format::kFormatVersion)), std::string::npos);
}

// Every command, given a trace it cannot read, exits 2 with one line on stderr and writes nothing to stdout or to
// its -o file: a JSON consumer never sees half a document.
TEST_F(Cli, BadInputExit2WithOneLineAndNoOutput) {
  const std::string empty = WriteTempFile("cli_empty.pb", "");
  const std::string out = testing::TempDir() + "cli_bad_input_" + std::to_string(getpid()) + ".out";
  const std::vector<std::vector<std::string>> commands = {
      {"summary"}, {"peak"}, {"leaks"}, {"pinned"}, {"oom"}, {"events"}, {"events", "--json"},
      {"ranks"},   {"check", "--no-oom"}, {"folded"}, {"folded", "-o", out}, {"pprof", "-o", out},
      {"perfetto", "-o", out}, {"html", "-o", out}, {"torch-snapshot", "-o", out},
      {"symbolize", "-o", out}, {"redact", "-o", out}};
  for (std::vector<std::string> args : commands) {
    args.insert(args.begin() + 1, empty);
    ToolResult r = Tool(args);
    EXPECT_EQ(r.code, 2) << args[0];
    EXPECT_EQ(r.err, "cumem-analyze: " + empty + ": empty file, not a trace\n") << args[0];
    EXPECT_EQ(r.out, "") << args[0];
    EXPECT_NE(access(out.c_str(), F_OK), 0) << args[0];
  }
  ToolResult r = Tool({"diff", path(), empty, "--json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  const std::string text = WriteTempFile("cli_text.pb", "not a trace at all");
  r = Tool({text, "--json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "cumem-analyze: " + text + ": not a cumemtrace trace (no header)\n");
  EXPECT_EQ(r.out, "");
  r = Tool({"events", "--json", "/nonexistent/run.pb"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
}

// check's verdict is the one finding that exits 1.
TEST_F(Cli, CheckOverABoundExits1) {
  ToolResult r = Tool({"check", path(), "--max-peak", "1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out.rfind("check failed: peak of ", 0), 0u) << r.out;
  r = Tool({"check", path(), "--max-peak", "1GiB"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("check passed: ", 0), 0u) << r.out;
}

// A flag a command would ignore is an error that names the command, not silently dropped.
TEST_F(Cli, FlagsACommandDoesNotTakeAreUsageErrors) {
  ToolResult r = Tool({"events", path(), "--top", "3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "cumem-analyze: --top is not an option of events (its options: cumem-analyze events --help) "
                   "(see cumem-analyze --help)\n");
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(Tool({"ranks", path(), "--group-by", "stack"}).code, 2);
  EXPECT_EQ(Tool({"perfetto", path(), "-o", "x.pb", "--leaks"}).code, 2);
}

// A report that cannot be written (a full disk, a closed pipe) is an error, not a silent exit 0.
TEST_F(Cli, AnUnwritableStdoutExits2) {
  std::FILE* full = std::fopen("/dev/full", "w");
  if (full == nullptr) GTEST_SKIP() << "no /dev/full here";
  std::FILE* err = std::tmpfile();
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(RunCli({"peak", path(), "--json"}, full, err), 2);
  std::rewind(err);
  char line[256] = {};
  ASSERT_NE(std::fgets(line, sizeof line, err), nullptr);
  EXPECT_EQ(std::string(line).rfind("cumem-analyze: cannot write the report to stdout", 0), 0u) << line;
  std::fclose(err);
  std::fclose(full);
}

// --help after a subcommand is that subcommand's usage and exactly the options it takes.
TEST_F(Cli, EachCommandHasItsOwnHelp) {
  ToolResult r = Tool({"pprof", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("usage: cumem-analyze pprof TRACE.pb -o OUT", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("--leaks"), std::string::npos);
  EXPECT_EQ(r.out.find("--group-by"), std::string::npos);
  EXPECT_NE(r.out.find("exit status"), std::string::npos);
  const std::string all = Tool({"--help"}).out;
  for (const char* name : {"summary", "peak", "leaks", "pinned", "oom", "events", "ranks", "symbolize", "redact",
                           "check", "diff", "folded", "html", "pprof", "perfetto", "torch-snapshot"}) {
    EXPECT_NE(all.find(std::string("\n  ") + name + " "), std::string::npos) << name;
    EXPECT_EQ(Tool({name, "--help"}).out.rfind(std::string("usage: cumem-analyze ") + name + " ", 0), 0u) << name;
  }
}

TEST_F(Cli, WarningsForCutOffAndUncleanTraces) {
  const std::string bytes = ScenarioTrace(false).bytes();
  const std::string no_trailer = WriteTempFile("cli_no_trailer.pb", bytes);
  ToolResult r = Tool({no_trailer});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.err, "warning: " + no_trailer + " has no trailer: the process did not exit cleanly\n");

  // Cut inside the last batch, which starts at this offset:
  const std::string full = ScenarioTrace(false).bytes();
  const size_t last_batch = full.size() - TraceBuilder()
                                             .Events({Alloc(10, 10, 0xA000, 4096, 3, format::Api::kCudaHostAlloc, -1, 1),
                                                      Alloc(11, 10.5, 0xB000, 8192, 3, format::Api::kCudaHostAlloc, -1, 1),
                                                      Free(12, 20, 0xA000, format::Api::kCudaFreeHost, -1, 1),
                                                      Alloc(13, 30, 0x7000'0000, uint64_t{1} << 30, 1,
                                                            format::Api::kCuMemAddressReserve)})
                                             .size();
  const std::string cut = WriteTempFile("cli_cut.pb", full.substr(0, full.size() - 5));
  for (std::string command : {"summary", "events", "leaks"}) {
    r = Tool({command, cut, "--json"});
    EXPECT_EQ(r.code, 0);
    EXPECT_EQ(r.err, "warning: " + cut + " is cut off at byte " + std::to_string(last_batch) +
                         " (the process was killed?); analyzed the 9 events before it\n");
    JsonValue j = Json(r);
    EXPECT_TRUE(j["health"]["truncated"].boolean());
    EXPECT_EQ(j["health"]["truncated_at"].uinteger(), last_batch);
    EXPECT_TRUE(j["health"]["events"].is_null());  // no trailer
  }
  r = Tool({path()});
  EXPECT_EQ(r.err, "");
}

TEST_F(Cli, SummaryJsonHasEveryReport) {
  ToolResult r = Tool({path(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  JsonValue j = Json(r);
  EXPECT_EQ(j["schema_version"].integer(), 2);
  EXPECT_EQ(j["command"].str(), "summary");
  EXPECT_EQ(j["trace"].str(), path());
  for (const char* key : {"process", "devices", "threads", "health", "peaks", "device_totals", "leaks", "leak_totals",
                          "ooms", "pinned", "pinned_spikes", "pinned_timeline"}) {
    EXPECT_TRUE(j.has(key)) << key;
  }
  const JsonValue& p = j["process"];
  EXPECT_EQ(p["pid"].integer(), 4242);
  EXPECT_EQ(p["argv"][1].str(), "train.py");
  EXPECT_EQ(p["hostname"].str(), "testhost");
  EXPECT_EQ(p["executable"].str(), "/usr/bin/python3");
  EXPECT_EQ(p["start_unix_time_ns"].integer(), kStartUnixNs);
  EXPECT_EQ(p["duration_ns"].integer(), 100'000'000);
  EXPECT_EQ(j["devices"][0]["device"].integer(), 0);
  EXPECT_EQ(j["devices"][0]["name"].str(), "NVIDIA H200");
  EXPECT_EQ(j["devices"][0]["total_memory"].uinteger(), 150'000'000'000u);
  EXPECT_EQ(j["devices"][0]["uuid"].str(), "0102ab");
  EXPECT_EQ(j["threads"][1]["name"].str(), "pt_data_pin");
  const JsonValue& h = j["health"];
  EXPECT_TRUE(h["has_trailer"].boolean());
  EXPECT_FALSE(h["truncated"].boolean());
  EXPECT_TRUE(h["truncated_at"].is_null());
  EXPECT_EQ(h["events_read"].uinteger(), 13u);
  EXPECT_EQ(h["events"].uinteger(), 13u);
  EXPECT_EQ(h["unwind_failures"].uinteger(), 2u);
  EXPECT_EQ(h["end_time_ns"].integer(), 100'000'000);
  EXPECT_EQ(h["failed_allocations"].uinteger(), 1u);

  ASSERT_EQ(j["peaks"].size(), 4u);
  EXPECT_EQ(j["peaks"][0]["device"].integer(), -1);
  EXPECT_EQ(j["peaks"][0]["kind"].str(), "pinned_host");
  EXPECT_EQ(j["peaks"][1]["kind"].str(), "device");
  EXPECT_EQ(j["peaks"][1]["peak_bytes"].uinteger(), 650u);
  EXPECT_EQ(j["peaks"][1]["peak_time_ns"].integer(), 5'000'000);
  EXPECT_EQ(j["peaks"][2]["kind"].str(), "pool");
  EXPECT_EQ(j["peaks"][3]["kind"].str(), "address_reserve");
  ASSERT_EQ(j["device_totals"].size(), 1u);
  EXPECT_EQ(j["device_totals"][0]["kind"].str(), "total");
  EXPECT_EQ(j["device_totals"][0]["peak_bytes"].uinteger(), 1350u);
  EXPECT_EQ(j["device_totals"][0]["peak_time_ns"].integer(), 7'000'000);
  EXPECT_EQ(j["pinned_timeline"].size(), 50u);
  EXPECT_EQ(j["pinned_spikes"].size(), 1u);
  EXPECT_EQ(j["ooms"].size(), 1u);
  EXPECT_EQ(j["leaks"].size(), 3u);
}

TEST_F(Cli, PeakJsonGroupsAndStacks) {
  ToolResult r = Tool({"peak", path(), "--json"});
  ASSERT_EQ(r.code, 0);
  JsonValue j = Json(r);
  EXPECT_EQ(j["command"].str(), "peak");
  EXPECT_FALSE(j.has("leaks"));
  const JsonValue& device = j["peaks"][1];
  EXPECT_EQ(device["peak_count"].uinteger(), 3u);
  EXPECT_EQ(device["peak_seq"].uinteger(), 5u);
  EXPECT_EQ(device["final_bytes"].uinteger(), 350u);
  EXPECT_EQ(device["stack_groups"].uinteger(), 2u);
  EXPECT_EQ(device["other_bytes"].uinteger(), 0u);
  ASSERT_EQ(device["top"].size(), 2u);
  const JsonValue& g0 = device["top"][0];
  EXPECT_EQ(g0["bytes"].uinteger(), 350u);
  EXPECT_EQ(g0["count"].uinteger(), 2u);
  EXPECT_NEAR(g0["share"].number(), 350.0 / 650.0, 1e-5);
  EXPECT_EQ(g0["stack_id"].uinteger(), 3u);
  EXPECT_EQ(Functions(g0["stack"]), (std::vector<std::string>{"??", "torch::train()"}));
  const JsonValue& unknown = g0["stack"][0];
  EXPECT_EQ(unknown["module"].str(), "/opt/torch/lib/libtorch.so");
  EXPECT_EQ(unknown["offset"].str(), "0x200");
  EXPECT_EQ(unknown["pc"].str(), "0x40200");
  EXPECT_TRUE(unknown["file"].is_null());
  EXPECT_TRUE(unknown["line"].is_null());
  const JsonValue& g1 = device["top"][1];
  EXPECT_EQ(g1["bytes"].uinteger(), 300u);
  EXPECT_EQ(Functions(g1["stack"]), (std::vector<std::string>{"cudaMalloc", "torch::train()"}));
  EXPECT_EQ(g1["stack"][0]["module"].str(), "/usr/lib/libcudart.so.13");

  // --top 1: one group, the rest summed.
  r = Tool({"peak", path(), "--json", "--top", "1", "--frames", "1"});
  j = Json(r);
  ASSERT_EQ(j["peaks"][1]["top"].size(), 1u);
  EXPECT_EQ(j["peaks"][1]["top"][0]["stack"].size(), 1u);
  EXPECT_EQ(j["peaks"][1]["other_bytes"].uinteger(), 300u);
  EXPECT_EQ(j["peaks"][1]["other_count"].uinteger(), 1u);
  EXPECT_EQ(j["peaks"][1]["stack_groups"].uinteger(), 2u);
}

TEST_F(Cli, LeaksJson) {
  ToolResult r = Tool({"leaks", path(), "--json"});
  JsonValue j = Json(r);
  ASSERT_EQ(j["leaks"].size(), 3u);
  EXPECT_EQ(j["leaks"][0]["device"].integer(), -1);
  EXPECT_EQ(j["leaks"][0]["kind"].str(), "pinned_host");
  EXPECT_EQ(j["leaks"][0]["bytes"].uinteger(), 8192u);
  EXPECT_EQ(j["leaks"][1]["kind"].str(), "device");
  EXPECT_EQ(j["leaks"][1]["bytes"].uinteger(), 350u);
  EXPECT_EQ(j["leaks"][1]["count"].uinteger(), 2u);
  EXPECT_EQ(Functions(j["leaks"][1]["stack"]), (std::vector<std::string>{"??", "torch::train()"}));
  EXPECT_EQ(j["leaks"][2]["kind"].str(), "address_reserve");
  EXPECT_EQ(j["leak_summary"]["memory_bytes"].uinteger(), 8192u + 350u);
  EXPECT_EQ(j["leak_summary"]["memory_count"].uinteger(), 3u);
  EXPECT_TRUE(j["leak_summary"]["clean_end"].boolean());
  EXPECT_FALSE(j.has("peaks"));
}

TEST_F(Cli, OomJson) {
  ToolResult r = Tool({"oom", path(), "--json"});
  JsonValue j = Json(r);
  ASSERT_EQ(j["ooms"].size(), 1u);
  const JsonValue& o = j["ooms"][0];
  EXPECT_EQ(o["device"].integer(), 0);
  EXPECT_EQ(o["kind"].str(), "device");
  EXPECT_EQ(o["requested_bytes"].uinteger(), uint64_t{1} << 40);
  EXPECT_EQ(o["api"].str(), "cudaMalloc");
  EXPECT_EQ(o["error"].str(), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(o["error_code"].integer(), 2);
  EXPECT_EQ(o["free_bytes"].uinteger(), 1000u);
  EXPECT_EQ(o["total_bytes"].uinteger(), 5000u);
  EXPECT_EQ(o["live_bytes"].uinteger(), 350u);
  EXPECT_EQ(o["live_count"].uinteger(), 2u);
  EXPECT_EQ(o["time_ns"].integer(), 9'000'000);
  EXPECT_EQ(o["seq"].uinteger(), 9u);
  EXPECT_EQ(o["thread"].str(), "python");
  EXPECT_EQ(o["thread_index"].uinteger(), 0u);
  EXPECT_EQ(Functions(o["stack"]), (std::vector<std::string>{"cudaMalloc", "torch::train()"}));
  ASSERT_EQ(o["live_by_stack"].size(), 1u);
  EXPECT_EQ(o["live_by_stack"][0]["bytes"].uinteger(), 350u);
  EXPECT_EQ(o["live_by_stack"][0]["count"].uinteger(), 2u);
  EXPECT_EQ(j["oom_count"].uinteger(), 1u);
}

TEST_F(Cli, PinnedJson) {
  ToolResult r = Tool({"pinned", path(), "--json"});
  JsonValue j = Json(r);
  EXPECT_EQ(j["pinned"]["peak_bytes"].uinteger(), 12288u);
  EXPECT_EQ(j["pinned"]["peak_time_ns"].integer(), 10'500'000);
  EXPECT_EQ(j["pinned"]["window_ns"].integer(), 1'000'000);
  ASSERT_EQ(j["pinned_spikes"].size(), 1u);
  const JsonValue& s = j["pinned_spikes"][0];
  EXPECT_EQ(s["start_ns"].integer(), 10'000'000);
  EXPECT_EQ(s["end_ns"].integer(), 11'000'000);
  EXPECT_EQ(s["rise_bytes"].uinteger(), 12288u);
  EXPECT_EQ(s["thread"].str(), "pt_data_pin");
  EXPECT_EQ(s["allocated_bytes"].uinteger(), 12288u);
  EXPECT_EQ(Functions(s["stack"]), (std::vector<std::string>{"??", "torch::train()"}));
  ASSERT_EQ(j["pinned_timeline"].size(), 50u);
  EXPECT_EQ(j["pinned_timeline"][4]["bytes"].uinteger(), 0u);
  EXPECT_EQ(j["pinned_timeline"][5]["time_ns"].integer(), 10'000'000);
  EXPECT_EQ(j["pinned_timeline"][5]["bytes"].uinteger(), 12288u);
  EXPECT_EQ(j["pinned_timeline"][49]["bytes"].uinteger(), 8192u);
}

TEST_F(Cli, EventsJsonInSeqOrder) {
  ToolResult r = Tool({"events", path(), "--json"});
  ASSERT_EQ(r.code, 0);
  JsonValue j = Json(r);
  const JsonValue& ev = j["events"];
  ASSERT_EQ(ev.size(), 13u);
  for (size_t i = 0; i < 13; ++i) EXPECT_EQ(ev[i]["seq"].uinteger(), i + 1);
  const JsonValue& free4 = ev[3];
  EXPECT_EQ(free4["op"].str(), "free");
  EXPECT_EQ(free4["api"].str(), "cudaFree");
  EXPECT_EQ(free4["kind"].str(), "device");
  EXPECT_EQ(free4["size"].uinteger(), 100u);
  EXPECT_EQ(free4["address"].str(), "0x1000");
  EXPECT_EQ(free4["thread"].uinteger(), 1u);
  EXPECT_EQ(free4["thread_name"].str(), "pt_data_pin");
  EXPECT_EQ(free4["time_ns"].integer(), 4'000'000);
  EXPECT_TRUE(free4["stream"].is_null());
  const JsonValue& async = ev[6];
  EXPECT_EQ(async["kind"].str(), "pool");
  EXPECT_EQ(async["stream"].str(), "0x0");
  const JsonValue& oom = ev[8];
  EXPECT_EQ(oom["result"].integer(), 2);
  EXPECT_EQ(oom["size"].uinteger(), uint64_t{1} << 40);
  EXPECT_EQ(oom["stack_id"].uinteger(), 2u);
  EXPECT_EQ(ev[12]["kind"].str(), "address_reserve");
  EXPECT_EQ(ev[12]["device"].integer(), 0);
  EXPECT_EQ(ev[9]["device"].integer(), -1);
  EXPECT_EQ(j["command"].str(), "events");
  EXPECT_EQ(j["health"]["events_read"].uinteger(), 13u);
  // One event per line, for grep.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 15);
}

TEST_F(Cli, EventsText) {
  ToolResult r = Tool({"events", path()});
  ASSERT_EQ(r.code, 0);
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 15u);
  EXPECT_NE(lines[0].find("seq"), std::string::npos);
  EXPECT_NE(lines[4].find("free"), std::string::npos);
  EXPECT_NE(lines[4].find("cudaFree"), std::string::npos);
  EXPECT_NE(lines[4].find("pt_data_pin (#1)"), std::string::npos);
  EXPECT_NE(lines[9].find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos);
  EXPECT_EQ(lines[14], "13 events");
}

TEST_F(Cli, TextReports) {
  ToolResult r = Tool({path()});
  ASSERT_EQ(r.code, 0);
  const std::string& s = r.out;
  EXPECT_NE(s.find("process     pid 4242  python train.py"), std::string::npos) << s;
  EXPECT_NE(s.find("started 2025-11-22 01:52:03 UTC   ran 0.100 s"), std::string::npos) << s;
  EXPECT_NE(s.find("device 0  NVIDIA H200  139.7 GiB"), std::string::npos) << s;
  // The answer first: the failed request, then the leak.
  EXPECT_NE(s.find("devices     device 0  NVIDIA H200  139.7 GiB\n\nOut of memory: device 0 ran out of memory at "
                   "torch::train()"),
            std::string::npos)
      << s;
  // The summary lists each device's total peak; `peak` every kind, and the address space.
  EXPECT_NE(s.find("device 0, total device memory: peak 1.3 KiB at 0.007 s, 3 allocations live"), std::string::npos)
      << s;
  const std::string peak = Tool({"peak", path()}).out;
  EXPECT_NE(peak.find("device 0, device: peak 650 B at 0.005 s, 3 allocations live"), std::string::npos) << peak;
  EXPECT_NE(peak.find("Address space (not memory)  kind                peak       at  live  at the end\n"
                      "device 0                    address_reserve  1.0 GiB  0.030 s     1     1.0 GiB\n"),
            std::string::npos)
      << peak;
  EXPECT_NE(s.find("Peak memory  kind             peak       at  live  at the end\n"
                   "device 0     total         1.3 KiB  0.007 s     3       350 B\n"
                   "device 0     device          650 B  0.005 s     3       350 B\n"
                   "device 0     pool           1000 B  0.007 s     1         0 B\n"
                   "host         pinned_host  12.0 KiB  0.010 s     2     8.0 KiB\n"),
            std::string::npos)
      << s;
  EXPECT_NE(Tool({"peak", path(), "--group-by", "stack"}).out.find("       350 B   53.8%  2 allocations     stack #3\n"
                   "        ?? (libtorch.so+0x200)\n"
                   "        torch::train()  (libtorch.so)\n"),
            std::string::npos)
      << s;
  // By default the same group is keyed by its innermost frame outside the runtime: the scenario has no user code.
  EXPECT_NE(peak.find("       350 B   53.8%  2 allocations     no user frame; in ?? (libtorch.so+0x200)  (stack #3)\n"
                      "        ?? (libtorch.so+0x200)\n"),
            std::string::npos)
      << peak;
  EXPECT_NE(s.find("Leaks: 8.3 KiB in 3 allocations live at the end of the trace"), std::string::npos) << s;
  EXPECT_NE(s.find("Failed allocations: 1"), std::string::npos) << s;
  EXPECT_NE(Tool({"oom", path()}).out.find("cudaMalloc of 1.0 TiB on device 0 (device) failed: "
                                          "CUDA_ERROR_OUT_OF_MEMORY (2)"),
            std::string::npos);
  EXPECT_NE(s.find("Pinned host memory: peak 12.0 KiB at 0.010 s"), std::string::npos) << s;
  EXPECT_NE(s.find("mostly by thread pt_data_pin (#1): 12.0 KiB"), std::string::npos) << s;
  EXPECT_NE(s.find("Health: 13 events read; the tool wrote 13 events, dropped 0, 2 unwind failures"),
            std::string::npos)
      << s;
  for (std::string command : {"peak", "leaks", "oom", "pinned"}) {
    r = Tool({command, path()});
    EXPECT_EQ(r.code, 0) << command;
    EXPECT_EQ(r.out.rfind("trace " + path() + ": pid 4242 python train.py, ran 0.100 s", 0), 0u) << r.out;
  }
  EXPECT_NE(Tool({"peak", path()}).out.find("device 0, total device memory: peak 1.3 KiB at 0.007 s, 3 allocations live"), std::string::npos);
  EXPECT_NE(Tool({"oom", path()}).out.find("driver: 1000 B free of 4.9 KiB"), std::string::npos);
}

// A trace without order marks (an older preload) whose free arrives 70 000 events late, past the reorder window: the
// numbers cannot be trusted, and every surface says so (stderr, the report's first line, JSON health).
TEST(CliOrder, EventsPastTheWindowAreAnnouncedEverywhere) {
  std::vector<Ev> events;
  events.push_back(Alloc(1, 0, 0x1000, 1 << 20));
  for (uint64_t i = 0; i < 70000; ++i) {
    events.push_back(Alloc(3 + 2 * i, 1, 0x100000 + 0x1000 * i, 512));
    events.push_back(Free(4 + 2 * i, 1, 0x100000 + 0x1000 * i));
  }
  events.push_back(Free(2, 2, 0x1000));  // the free of the first allocation, written last
  TraceBuilder b;
  b.Header().Thread(1, 100, "main");
  for (size_t i = 0; i < events.size(); i += 8192) {
    b.Events(std::vector<Ev>(events.begin() + i, events.begin() + std::min(events.size(), i + 8192)));
  }
  const std::string path = b.Write("late.pb");
  ToolResult r = Tool({path});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.err.find("could not be put in order"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.rfind("WARNING: 1 events reached the analyzer after later ones", 0), 0u) << r.out.substr(0, 300);
  r = Tool({"peak", "--json", path});
  const std::optional<JsonValue> json = JsonValue::Parse(r.out);
  ASSERT_TRUE(json.has_value());
  EXPECT_FALSE((*json)["health"]["order_exact"].boolean());
  EXPECT_EQ((*json)["health"]["late_events"].number(), 1);
}

// A trace whose allocator events are more than a replay made by the way holds is not read again to find that out:
// the analysis counted them (here the trace does not even exist: a read would fail).
TEST(OomReplays, ATooLongTraceIsNotReadAgain) {
  CommandLine cl;
  cl.trace = "/nonexistent/never-read.pb";
  OomReport report;
  report.torch_ooms.emplace_back();
  report.replay_steps = uint64_t{3} << 20;
  AddOomReplays(cl, &report);
  EXPECT_TRUE(report.replayed);
  EXPECT_EQ(report.replay_unchecked,
            "the trace has 3145728 allocator events, more than the 2097152 a replay made by the way holds (about 56 "
            "bytes each): run cumem-analyze whatif on it");
  EXPECT_TRUE(report.replay_checks.empty());
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
