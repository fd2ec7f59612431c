// Python frames in stacks, end to end on the CPU, under every CPython from 3.10 to 3.14 this machine has
// (cmake/test_pythons.cmake): tests/e2e/python/ctypes_alloc.py allocates through ctypes, which releases the GIL as
// PyTorch does, from the main thread and a second thread, nested calls, a generator, a coroutine and through a C
// function (map) between two Python frames. The oracle is the script itself: each allocating line carries a
// `# LINE:<tag>` marker, and the test reads the line numbers from the file. Sizes tell the allocations apart.
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/format.h"
#include "tests/e2e/e2e_support.h"
#include "tests/test_pythons.h"
#include "tests/unit/analyzer/cli_runner.h"
#include "tests/unit/analyzer/json_value.h"

namespace cumemtrace::e2e {
namespace {

constexpr char kScript[] = E2E_PYTHON_DIR "/ctypes_alloc.py";
constexpr char kTorchScript[] = E2E_PYTHON_DIR "/torch_blocks.py";

std::map<std::string, uint32_t> MarkerLines(const char* script = kScript) {
  std::map<std::string, uint32_t> lines;
  std::ifstream in(script);
  std::string line;
  for (uint32_t number = 1; std::getline(in, line); ++number) {
    size_t at = line.find("# LINE:");
    if (at != std::string::npos) lines[line.substr(at + 7)] = number;
  }
  return lines;
}

struct PyFrame {
  std::string function;
  std::string file;
  uint32_t line;
  bool operator==(const PyFrame& o) const { return function == o.function && file == o.file && line == o.line; }
};

std::ostream& operator<<(std::ostream& os, const PyFrame& f) {
  return os << f.file << ":" << f.line << " " << f.function;
}

// The Python frames of an event's stack, innermost first; *marker when the stack carries the no-Python marker.
std::vector<PyFrame> PythonFramesOf(const CollectedTrace& trace, const analyzer::Event& event, bool* marker,
                                    int* native_before_python) {
  std::vector<uint64_t> pcs;
  EXPECT_TRUE(trace.StackPcs(event.stack, &pcs).ok());
  std::vector<PyFrame> frames;
  *marker = false;
  *native_before_python = -1;
  for (size_t i = 0; i < pcs.size(); ++i) {
    if (!format::IsPythonFramePc(pcs[i])) continue;
    uint64_t id = format::PythonFrameIdOfPc(pcs[i]);
    if (id == format::kNoPythonFramesId) {
      *marker = true;
      continue;
    }
    if (*native_before_python < 0) *native_before_python = static_cast<int>(i);
    auto it = trace.python_frames.find(id);
    if (it == trace.python_frames.end()) {
      ADD_FAILURE() << "python frame " << id << " was never defined";
      continue;
    }
    auto text = [&](uint32_t sid) {
      auto s = trace.strings.find(sid);
      return s == trace.strings.end() ? std::string("<undefined>") : s->second;
    };
    frames.push_back(PyFrame{text(it->second.function), text(it->second.file), it->second.line});
  }
  return frames;
}

// A notice about Python frames (other notices, such as file and line from debug info, may be there).
bool HasPythonNotice(const CollectedTrace& trace) {
  for (const analyzer::NoticeInfo& n : trace.notices) {
    if (n.code == format::NoticeCode::kPythonUnsupported || n.code == format::NoticeCode::kPythonLayoutMismatch) {
      ADD_FAILURE() << n.message;
      return true;
    }
  }
  return false;
}

using test::TestPython;

std::vector<TestPython> Pythons() { return test::ParseTestPythons(TEST_PYTHONS); }

// 3.10's code objects have no qualified name: a method shows as its bare name there.
std::string Qualified(const TestPython& python, const std::string& qualified) {
  if (python.minor() >= 11) return qualified;
  const size_t dot = qualified.rfind('.');
  return dot == std::string::npos ? qualified : qualified.substr(dot + 1);
}

// One traced run of ctypes_alloc.py per interpreter, shared by that interpreter's tests.
class PythonStacks : public ::testing::TestWithParam<TestPython> {
 protected:
  struct Run {
    RunResult run;
    CollectedTrace trace;
  };
  static void TearDownTestSuite() {
    for (auto& [version, run] : runs_) RemoveRunDir(run->run);
    runs_.clear();
  }
  void SetUp() override {
    std::unique_ptr<Run>& slot = runs_[GetParam().version];
    if (slot == nullptr) {
      RunOptions options;
      options.program_path = GetParam().path;
      options.args = {kScript, E2E_PROGRAM_DIR};
      RunResult run = RunProgram(options);
      CollectedTrace trace = CollectTrace(run.trace_path);
      slot.reset(new Run{std::move(run), std::move(trace)});
    }
    run_ = &slot->run;
    trace_ = &slot->trace;
  }
  const analyzer::Event* AllocOfSize(uint64_t size) {
    for (const analyzer::Event& e : trace_->events) {
      if (e.size == size && e.info->op == format::Op::kAlloc) return &e;
    }
    return nullptr;
  }
  std::vector<PyFrame> FramesOfSize(uint64_t size) {
    const analyzer::Event* e = AllocOfSize(size);
    if (e == nullptr) {
      ADD_FAILURE() << "no allocation of " << size << " bytes; " << run_->Describe();
      return {};
    }
    bool marker = false;
    int first_python = -1;
    std::vector<PyFrame> frames = PythonFramesOf(*trace_, *e, &marker, &first_python);
    EXPECT_FALSE(marker);
    return frames;
  }
  static std::map<std::string, std::unique_ptr<Run>> runs_;
  RunResult* run_ = nullptr;
  CollectedTrace* trace_ = nullptr;
};
std::map<std::string, std::unique_ptr<PythonStacks::Run>> PythonStacks::runs_;

TEST_P(PythonStacks, ProgramRunsUnchanged) {
  ASSERT_EQ(run_->exit_code, 0) << run_->Describe();
  std::ifstream out(run_->dir + "/stdout.txt");
  std::stringstream text;
  text << out.rdbuf();
  EXPECT_EQ(text.str(), "ok\n");
  ASSERT_TRUE(trace_->status.ok()) << trace_->status;
  EXPECT_TRUE(trace_->header.python_frames_enabled);
  EXPECT_FALSE(HasPythonNotice(*trace_));
  ASSERT_TRUE(trace_->has_trailer);
  EXPECT_EQ(trace_->trailer.python_failures, 0u);
  // Every allocation but the native thread's (13 allocations, 13 frees) came from Python code; successful frees
  // carry no stack (CUMEMTRACE_FREE_STACKS).
  EXPECT_EQ(trace_->events.size(), 26u);
  EXPECT_EQ(trace_->trailer.python_stacks, 12u);
}

TEST_P(PythonStacks, GeneratorCoroutineAndCFunctionFramesAreInPlace) {
  const std::map<std::string, uint32_t> lines = MarkerLines();
  EXPECT_EQ(FramesOfSize(6 << 20), (std::vector<PyFrame>{{"inner", kScript, lines.at("inner")},
                                                         {"generator", kScript, lines.at("generator")},
                                                         {"main", kScript, lines.at("main_generator")},
                                                         {"<module>", kScript, lines.at("module")}}));
  EXPECT_EQ(FramesOfSize(7 << 20), (std::vector<PyFrame>{{"inner", kScript, lines.at("inner")},
                                                         {"coroutine", kScript, lines.at("coroutine")},
                                                         {"run_coroutine", kScript, lines.at("run_coroutine")},
                                                         {"main", kScript, lines.at("main_coroutine")},
                                                         {"<module>", kScript, lines.at("module")}}));
  // map() is a C function: inner's frame and main's belong to two calls of the eval loop.
  EXPECT_EQ(FramesOfSize(8 << 20), (std::vector<PyFrame>{{"inner", kScript, lines.at("inner")},
                                                         {"main", kScript, lines.at("main_map")},
                                                         {"<module>", kScript, lines.at("module")}}));
}

TEST_P(PythonStacks, MainThreadShowsEveryCallerWithItsLine) {
  const std::map<std::string, uint32_t> lines = MarkerLines();
  const analyzer::Event* e = AllocOfSize(1 << 20);
  ASSERT_NE(e, nullptr) << run_->Describe();
  bool marker = false;
  int first_python = -1;
  std::vector<PyFrame> frames = PythonFramesOf(*trace_, *e, &marker, &first_python);
  EXPECT_FALSE(marker);
  const std::vector<PyFrame> expected = {
      {"inner", kScript, lines.at("inner")},
      {"outer", kScript, lines.at("outer")},
      {"main", kScript, lines.at("main_outer")},
      {"<module>", kScript, lines.at("module")},
  };
  EXPECT_EQ(frames, expected);
  // Native frames (the call into CUDA, ctypes, libffi) come before the innermost Python frame, and the
  // interpreter's own frames outside its eval loop (its main, libc's start) after the outermost one: the Python
  // frames sit where the interpreter ran them.
  EXPECT_GT(first_python, 0);
  std::vector<uint64_t> pcs;
  ASSERT_TRUE(trace_->StackPcs(e->stack, &pcs).ok());
  ASSERT_FALSE(pcs.empty());
  EXPECT_FALSE(format::IsPythonFramePc(pcs.back())) << "the outermost frame is a Python frame";
}

// map() is a C function: the native frames of its call lie between the frame it calls and the frame that called it.
TEST_P(PythonStacks, ACFunctionsNativeFramesLieBetweenThePythonFramesAroundIt) {
  const analyzer::Event* e = AllocOfSize(8 << 20);
  ASSERT_NE(e, nullptr) << run_->Describe();
  std::vector<uint64_t> pcs;
  ASSERT_TRUE(trace_->StackPcs(e->stack, &pcs).ok());
  std::vector<size_t> python_at;
  for (size_t i = 0; i < pcs.size(); ++i) {
    if (format::IsPythonFramePc(pcs[i])) python_at.push_back(i);
  }
  ASSERT_GE(python_at.size(), 2u);
  EXPECT_GT(python_at[1], python_at[0] + 1) << "inner's and main's frames are adjacent";
}

// Consecutive stacks of one thread that share outer frames and differ inside (another line, another depth): each
// has exactly its own frames, whatever the stack before it was.
TEST_P(PythonStacks, ConsecutiveStacksKeepTheirOwnFrames) {
  const std::map<std::string, uint32_t> lines = MarkerLines();
  for (uint64_t i = 0; i < 6; ++i) {
    const analyzer::Event* e = AllocOfSize((5 << 20) + i);
    ASSERT_NE(e, nullptr) << i;
    bool marker = false;
    int first_python = -1;
    std::vector<PyFrame> frames = PythonFramesOf(*trace_, *e, &marker, &first_python);
    std::vector<PyFrame> expected = {{"inner", kScript, lines.at("inner")}};
    if (i % 2 == 1) expected.push_back({"outer", kScript, lines.at("outer")});
    expected.push_back({"churn", kScript, lines.at(i % 2 == 0 ? "churn_even" : "churn_odd")});
    expected.push_back({"main", kScript, lines.at("main_churn")});
    expected.push_back({"<module>", kScript, lines.at("module")});
    EXPECT_EQ(frames, expected) << "allocation " << i;
  }
}

TEST_P(PythonStacks, MethodsAreQualified) {
  const std::map<std::string, uint32_t> lines = MarkerLines();
  const analyzer::Event* e = AllocOfSize(2 << 20);
  ASSERT_NE(e, nullptr);
  bool marker = false;
  int first_python = -1;
  std::vector<PyFrame> frames = PythonFramesOf(*trace_, *e, &marker, &first_python);
  ASSERT_GE(frames.size(), 2u);
  EXPECT_EQ(frames[0], (PyFrame{Qualified(GetParam(), "Model.allocate"), kScript, lines.at("method")}));
  EXPECT_EQ(frames[1], (PyFrame{"main", kScript, lines.at("main_method")}));
}

TEST_P(PythonStacks, SecondThreadShowsItsOwnFrames) {
  const std::map<std::string, uint32_t> lines = MarkerLines();
  const analyzer::Event* e = AllocOfSize(3 << 20);
  ASSERT_NE(e, nullptr);
  bool marker = false;
  int first_python = -1;
  std::vector<PyFrame> frames = PythonFramesOf(*trace_, *e, &marker, &first_python);
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(frames[0], (PyFrame{"inner", kScript, lines.at("inner")}));
  EXPECT_EQ(frames[1], (PyFrame{"outer", kScript, lines.at("outer")}));
  EXPECT_EQ(frames[2], (PyFrame{"worker", kScript, lines.at("worker")}));
  // Then threading.py's own frames (run, _bootstrap_inner, _bootstrap), never the main thread's.
  for (size_t i = 3; i < frames.size(); ++i) {
    EXPECT_NE(frames[i].file.find("threading.py"), std::string::npos) << frames[i];
  }
  EXPECT_GE(frames.size(), 4u);
  const int main_tid = run_->pid;
  EXPECT_NE(trace_->Tid(*e), main_tid);
}

TEST_P(PythonStacks, ThreadWithoutPythonSaysSo) {
  const analyzer::Event* e = AllocOfSize(4 << 20);
  ASSERT_NE(e, nullptr);
  bool marker = false;
  int first_python = -1;
  std::vector<PyFrame> frames = PythonFramesOf(*trace_, *e, &marker, &first_python);
  EXPECT_TRUE(frames.empty());
  EXPECT_TRUE(marker);
  // The marker is the outermost frame.
  std::vector<uint64_t> pcs;
  ASSERT_TRUE(trace_->StackPcs(e->stack, &pcs).ok());
  ASSERT_FALSE(pcs.empty());
  EXPECT_EQ(pcs.back(), format::PcOfPythonFrameId(format::kNoPythonFramesId));
}

// The same trace through cumem-analyze's JSON, as a user sees it: Python frames with kind, file, line and function,
// and the default grouping by the innermost frame of the user's own code.
analyzer::test::JsonValue AnalyzeJson(const std::vector<std::string>& args) {
  analyzer::test::ToolResult r = analyzer::test::Tool(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return analyzer::test::Json(r);
}

// The top groups of device 0's peak.
const analyzer::test::JsonValue* DevicePeakTop(const analyzer::test::JsonValue& json) {
  for (const analyzer::test::JsonValue& peak : json["peaks"].array()) {
    if (peak["device"].integer() == 0 && peak["kind"].str() == "device") return &peak["top"];
  }
  ADD_FAILURE() << "no peak of device 0";
  return nullptr;
}

std::vector<std::string> PythonFramesText(const analyzer::test::JsonValue& stack) {
  std::vector<std::string> frames;
  for (const analyzer::test::JsonValue& f : stack.array()) {
    if (f["kind"].str() == "python") {
      frames.push_back(f["function"].str() + ":" + std::to_string(f["line"].integer()));
      EXPECT_EQ(f["file"].str().find("/") == 0, true) << f["file"].str();
    }
  }
  return frames;
}

TEST_P(PythonStacks, AnalyzerJsonGroupsByTheUsersLine) {
  const std::map<std::string, uint32_t> lines = MarkerLines();
  analyzer::test::JsonValue json = AnalyzeJson({"peak", run_->trace_path, "--json"});
  EXPECT_EQ(json["group_by"].str(), "user");
  EXPECT_TRUE(json["process"]["python_frames_enabled"].boolean());
  const analyzer::test::JsonValue* top = DevicePeakTop(json);
  ASSERT_NE(top, nullptr);
  // 1 MiB (main thread), 3 MiB (the second thread), churn's six (5 MiB + i, from two call paths) and those through
  // the generator, the coroutine and map (6, 7 and 8 MiB) were all allocated at inner's line: one group of seven
  // stacks.
  bool saw_inner = false, saw_method = false, saw_native_thread = false;
  for (const analyzer::test::JsonValue& group : top->array()) {
    const analyzer::test::JsonValue& user = group["user_frame"];
    if (!user.is_null() && user["function"].str() == "inner") {
      saw_inner = true;
      EXPECT_EQ(group["bytes"].uinteger(), (4u << 20) + 6 * (5u << 20) + (0 + 1 + 2 + 3 + 4 + 5) + (21u << 20));
      EXPECT_EQ(group["stacks"].uinteger(), 7u);
      EXPECT_EQ(user["kind"].str(), "python");
      EXPECT_EQ(user["file"].str(), kScript);
      EXPECT_EQ(user["line"].uinteger(), lines.at("inner"));
    } else if (!user.is_null() && user["function"].str() == Qualified(GetParam(), "Model.allocate")) {
      saw_method = true;
      EXPECT_EQ(group["bytes"].uinteger(), 2u << 20);
      EXPECT_EQ(user["line"].uinteger(), lines.at("method"));
    } else if (group["bytes"].uinteger() == (4u << 20)) {
      saw_native_thread = true;  // the C thread: its outermost frame is the no-Python marker
      const analyzer::test::JsonValue& stack = group["stack"];
      ASSERT_GT(stack.size(), 0u);
      EXPECT_EQ(stack[stack.size() - 1]["kind"].str(), "no_python");
    }
  }
  EXPECT_TRUE(saw_inner);
  EXPECT_TRUE(saw_method);
  EXPECT_TRUE(saw_native_thread);
}

TEST_P(PythonStacks, AnalyzerJsonStacksCarryEachThreadsPythonFrames) {
  const std::map<std::string, uint32_t> lines = MarkerLines();
  analyzer::test::JsonValue json = AnalyzeJson({"peak", run_->trace_path, "--json", "--group-by", "stack"});
  const analyzer::test::JsonValue* top = DevicePeakTop(json);
  ASSERT_NE(top, nullptr);
  auto at = [&](const char* tag) { return std::to_string(lines.at(tag)); };
  bool saw_main = false, saw_thread = false;
  for (const analyzer::test::JsonValue& group : top->array()) {
    std::vector<std::string> frames = PythonFramesText(group["stack"]);
    if (group["bytes"].uinteger() == (1u << 20)) {
      saw_main = true;
      EXPECT_EQ(frames, (std::vector<std::string>{"inner:" + at("inner"), "outer:" + at("outer"),
                                                  "main:" + at("main_outer"), "<module>:" + at("module")}));
    } else if (group["bytes"].uinteger() == (3u << 20)) {
      saw_thread = true;
      ASSERT_GE(frames.size(), 4u);
      EXPECT_EQ(std::vector<std::string>(frames.begin(), frames.begin() + 3),
                (std::vector<std::string>{"inner:" + at("inner"), "outer:" + at("outer"), "worker:" + at("worker")}));
      EXPECT_EQ(frames[3].rfind(Qualified(GetParam(), "Thread.run") + ":", 0), 0u) << frames[3];
    }
  }
  EXPECT_TRUE(saw_main);
  EXPECT_TRUE(saw_thread);
}

class PythonTorchBlocks : public ::testing::TestWithParam<TestPython> {};
class PythonStacksOff : public ::testing::TestWithParam<TestPython> {};

// A PyTorch block allocated from Python keeps CUMEMTRACE_TORCH_STACK_DEPTH native frames (default 16; here 60 lie
// between the call and the allocator) and all its Python frames, after the native ones; the cut is by design, so
// not counted as a truncated stack, and the header says the depth.
TEST_P(PythonTorchBlocks, KeepTheirPythonFramesAndTheTorchDepthOfNativeFrames) {
  const std::map<std::string, uint32_t> lines = MarkerLines(kTorchScript);
  for (const char* depth : {"", "8"}) {
    RunOptions options;
    options.program_path = GetParam().path;
    options.args = {kTorchScript, E2E_FAKE_TORCH_DIR};
    if (*depth != '\0') options.env = {{"CUMEMTRACE_TORCH_STACK_DEPTH", depth}};
    RunResult run = RunProgram(options);
    ASSERT_EQ(run.exit_code, 0) << run.Describe();
    CollectedTrace trace = CollectTrace(run.trace_path);
    ASSERT_TRUE(trace.status.ok()) << trace.status;
    const uint32_t want_native = *depth == '\0' ? 16 : 8;
    EXPECT_EQ(trace.header.torch_stack_depth, want_native);
    const analyzer::Event* block = nullptr;
    for (const analyzer::Event& e : trace.events) {
      if (format::IsTorchBlockAlloc(e.api) && e.size == (3u << 20)) block = &e;
    }
    ASSERT_NE(block, nullptr) << run.Describe();
    std::vector<uint64_t> pcs;
    ASSERT_TRUE(trace.StackPcs(block->stack, &pcs).ok());
    size_t native = 0;
    while (native < pcs.size() && !format::IsPythonFramePc(pcs[native])) ++native;
    EXPECT_EQ(native, want_native) << "depth '" << depth << "'";
    bool marker = false;
    int first_python = -1;
    const std::vector<PyFrame> expected = {
        {"forward", kTorchScript, lines.at("forward")},
        {"main", kTorchScript, lines.at("main")},
        {"<module>", kTorchScript, lines.at("module")},
    };
    EXPECT_EQ(PythonFramesOf(trace, *block, &marker, &first_python), expected);
    EXPECT_FALSE(marker);
    ASSERT_TRUE(trace.has_trailer);
    // One truncated stack: the driver allocation of the segment (deeper than CUMEMTRACE_STACK_DEPTH's 64), not
    // the block.
    EXPECT_EQ(trace.trailer.truncated_stacks, 1u);
    RemoveRunDir(run);
  }
}

// The trailer's recorder time comes with its parts (estimated: a thread's first 64 events are clocked one by one,
// then a random 1 in 64, so only their presence is certain): 4000 blocks with Python and native stacks give every
// stack part a share, and the analyzer's JSON carries them.
TEST_P(PythonTorchBlocks, TrailerSaysWhereTheRecordersTimeWent) {
  RunOptions options;
  options.program_path = GetParam().path;
  options.args = {kTorchScript, E2E_FAKE_TORCH_DIR, "4000"};
  RunResult run = RunProgram(options);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  ASSERT_TRUE(trace.has_trailer);
  EXPECT_GT(trace.trailer.recorder_time_ns, 0u);
  EXPECT_GT(trace.trailer.recorder_python_ns, 0u);
  EXPECT_GT(trace.trailer.recorder_unwind_ns, 0u);
  EXPECT_GT(trace.trailer.recorder_stack_ns, 0u);
  EXPECT_GT(trace.trailer.recorder_prologue_ns, 0u);
  EXPECT_GT(trace.trailer.recorder_append_ns, 0u);
  const analyzer::test::JsonValue json = AnalyzeJson({"summary", run.trace_path, "--json"});
  EXPECT_EQ(json["health"]["recorder_python_ns"].uinteger(), trace.trailer.recorder_python_ns);
  EXPECT_EQ(json["health"]["recorder_unwind_ns"].uinteger(), trace.trailer.recorder_unwind_ns);
  EXPECT_EQ(json["health"]["recorder_lock_wait_ns"].uinteger(), trace.trailer.recorder_lock_wait_ns);
  EXPECT_EQ(json["health"]["recorder_stack_ns"].uinteger(), trace.trailer.recorder_stack_ns);
  EXPECT_EQ(json["health"]["recorder_prologue_ns"].uinteger(), trace.trailer.recorder_prologue_ns);
  EXPECT_EQ(json["health"]["recorder_append_ns"].uinteger(), trace.trailer.recorder_append_ns);
  RemoveRunDir(run);
}

TEST_P(PythonStacksOff, EnvironmentTurnsThemOff) {
  RunOptions options;
  options.program_path = GetParam().path;
  options.args = {kScript, E2E_PROGRAM_DIR};
  options.env = {{"CUMEMTRACE_PYTHON", "0"}};
  RunResult run = RunProgram(options);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  EXPECT_FALSE(trace.header.python_frames_enabled);
  EXPECT_TRUE(trace.python_frames.empty());
  for (const auto& [id, node] : trace.stack_nodes) EXPECT_FALSE(format::IsPythonFramePc(node.pc));
  EXPECT_EQ(trace.trailer.python_stacks, 0u);
  RemoveRunDir(run);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonStacks, ::testing::ValuesIn(Pythons()), test::TestPythonName);
INSTANTIATE_TEST_SUITE_P(Interpreters, PythonTorchBlocks, ::testing::ValuesIn(Pythons()), test::TestPythonName);
INSTANTIATE_TEST_SUITE_P(Interpreters, PythonStacksOff, ::testing::ValuesIn(Pythons()), test::TestPythonName);
// A machine without any of these interpreters runs only the fake-libpython cases below.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PythonStacks);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PythonTorchBlocks);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PythonStacksOff);

// Versions and layouts this machine cannot run, through a program that loads a fake libpython after start-up
// (tests/e2e/programs/fake_python*.cc): the preload must find it late, fall back to native frames for versions and
// layouts it does not know, and say why, once.
struct FakePythonCase {
  const char* name;
  const char* version;
  const char* code_size;
  format::NoticeCode expected;  // kUnknown: no Python notice
  const char* message_part;
  bool legacy = false;                  // no Py_Version, only Py_GetVersion (3.10 and older)
  const char* cookie = "xdebugpy";      // of the debug offsets (3.13+)
  const char* free_threaded = "0";
};

class FakePython : public ::testing::TestWithParam<FakePythonCase> {};

TEST_P(FakePython, FallsBackToNativeFramesAndSaysWhyOnce) {
  const FakePythonCase& c = GetParam();
  RunOptions options;
  options.program = "fake_python";
  options.env = {{"FAKE_PY_VERSION", c.version},
                 {"FAKE_PY_CODE_SIZE", c.code_size},
                 {"FAKE_PY_COOKIE", c.cookie},
                 {"FAKE_PY_FREE_THREADED", c.free_threaded},
                 {"FAKE_PY_LIB", c.legacy ? "libe2e_fake_python_legacy_lib.so" : "libe2e_fake_python_lib.so"}};
  RunResult run = RunProgram(options);
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  ASSERT_EQ(trace.events.size(), 4u);  // two allocations, two frees
  int python_notices = 0;
  for (const analyzer::NoticeInfo& n : trace.notices) {
    if (n.code != format::NoticeCode::kPythonUnsupported && n.code != format::NoticeCode::kPythonLayoutMismatch) {
      continue;
    }
    ++python_notices;
    EXPECT_EQ(n.code, c.expected) << n.message;
    EXPECT_NE(n.message.find(c.message_part), std::string::npos) << n.message;
  }
  EXPECT_EQ(python_notices, c.expected == format::NoticeCode::kUnknown ? 0 : 1);
  // Unsupported: native frames only. Supported: the thread has no Python state, which the stacks taken after the
  // interpreter was found say (the first allocation may come before the flush thread's lookup).
  bool marker = false;
  for (const auto& [id, node] : trace.stack_nodes) {
    if (format::IsPythonFramePc(node.pc)) {
      EXPECT_EQ(format::PythonFrameIdOfPc(node.pc), format::kNoPythonFramesId);
      marker = true;
    }
  }
  EXPECT_EQ(marker, c.expected == format::NoticeCode::kUnknown);
  EXPECT_EQ(trace.trailer.python_stacks, 0u);
  RemoveRunDir(run);
}

FakePythonCase Case(const char* name, const char* version, const char* code_size, format::NoticeCode expected,
                    const char* message_part) {
  FakePythonCase c;
  c.name = name;
  c.version = version;
  c.code_size = code_size;
  c.expected = expected;
  c.message_part = message_part;
  return c;
}

FakePythonCase Legacy(FakePythonCase c) {
  c.legacy = true;
  return c;
}

FakePythonCase WithDebugOffsets(FakePythonCase c, const char* cookie, const char* free_threaded) {
  c.cookie = cookie;
  c.free_threaded = free_threaded;
  return c;
}

constexpr format::NoticeCode kNone = format::NoticeCode::kUnknown;
constexpr format::NoticeCode kUnsupported = format::NoticeCode::kPythonUnsupported;
constexpr format::NoticeCode kMismatch = format::NoticeCode::kPythonLayoutMismatch;

INSTANTIATE_TEST_SUITE_P(
    Versions, FakePython,
    ::testing::Values(
        Case("Python312", "0x030c03f0", "192", kNone, ""),
        Case("Python312BadLayout", "0x030c03f0", "200", kMismatch, "code objects are 200 bytes"),
        // 3.10 is read through Py_GetVersion; its frame objects are checked too (the double has no PyFrame_Type).
        Legacy(Case("Python310", "0x030a0df0", "176", kMismatch, "Python 3.10.13: frame objects are 0 bytes")),
        Legacy(Case("Python39", "0x030912f0", "176", kUnsupported, "Python 3.9.18: its frame layout is not known")),
        // 3.13+: the debug offsets decide. The double's are zeros after the head: a 3.13 walk refuses them.
        Case("Python313", "0x030d01f0", "200", kMismatch, "Python 3.13.1: its object header is not two words"),
        WithDebugOffsets(Case("Python313BadCookie", "0x030d01f0", "200", kMismatch, "no \"xdebugpy\" cookie"),
                         "xdebugp!", "0"),
        WithDebugOffsets(Case("Python313FreeThreaded", "0x030d01f0", "200", kUnsupported, "free-threaded build"),
                         "xdebugpy", "1"),
        Case("Python314", "0x030e00f0", "200", kUnsupported, "Python 3.14.0: its frames hold tagged references"),
        Case("Python315", "0x030f00a0", "200", kUnsupported, "layout of its debug offsets is not known")),
    [](const ::testing::TestParamInfo<FakePythonCase>& info) { return std::string(info.param.name); });

// A C program (no Python in the process) gets no marker frames and no notice.
TEST(PythonStacksAbsent, NativeProgramHasNoPythonFrames) {
  RunOptions options;
  options.program = "direct";
  RunResult run = RunProgram(options);
  CollectedTrace trace = CollectTrace(run.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status << run.Describe();
  EXPECT_TRUE(trace.python_frames.empty());
  EXPECT_FALSE(HasPythonNotice(trace));
  for (const auto& [id, node] : trace.stack_nodes) EXPECT_FALSE(format::IsPythonFramePc(node.pc));
  RemoveRunDir(run);
}

}  // namespace
}  // namespace cumemtrace::e2e
