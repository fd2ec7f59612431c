// End-to-end tests of what a trace says about code and where it can be read: file and line written by the preload
// at exit for a program built with -g (e2e_lines), the same restored by `cumem-analyze symbolize` on a copy cut
// before its symbols (also with the binary moved into a --debug-dir), `redact`, and a trace analyzed in another
// folder after the program and the fake libraries are gone.
//
// Oracles: the expected lines are read from the marked source file (programs/lines.cc, "e2e-line: NAME"), not from
// the tool; cuts are made by parsing the packet framing here; the redacted strings are written out by hand.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "analyzer/commands/run_cli.h"
#include "analyzer/reader/trace_reader.h"
#include "analyzer/tools/debug_info.h"
#include "e2e_support.h"
#include "proto/format.h"

#ifndef E2E_SOURCE_DIR
#error "E2E_SOURCE_DIR (tests/e2e in the source tree) must be defined by the build"
#endif
#ifndef E2E_HOSTNAME_SHIM
#error "E2E_HOSTNAME_SHIM (path of the gethostname test double) must be defined by the build"
#endif

namespace cumemtrace::e2e {
namespace {

namespace fs = std::filesystem;
using analyzer::Event;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr char kFakeHost[] = "cumemtrace-e2e-host-q7z";
constexpr char kFakeUser[] = "redact-user-q7z";

const std::string& LinesSource() {
  static const std::string path = std::string(E2E_SOURCE_DIR) + "/programs/lines.cc";
  return path;
}

// The line of programs/lines.cc marked "e2e-line: NAME".
int MarkedLine(const std::string& name) {
  std::ifstream in(LinesSource());
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (absl::EndsWith(line, "// e2e-line: " + name)) return number;
  }
  ADD_FAILURE() << "no marker " << name << " in " << LinesSource();
  return -1;
}

// What a trace says about code, as the reader delivers it.
struct Code {
  absl::Status status;
  analyzer::TraceHeader header;
  std::map<uint32_t, std::string> strings;
  std::map<uint64_t, analyzer::SymbolInfo> symbols;
  std::vector<analyzer::ModuleInfo> modules;
  std::map<uint64_t, analyzer::StackNode> nodes;
  std::vector<Event> events;
  std::vector<analyzer::NoticeInfo> notices;

  std::vector<uint64_t> Pcs(uint64_t stack) const {
    std::vector<uint64_t> pcs;
    for (auto it = nodes.find(stack); it != nodes.end(); it = nodes.find(it->second.parent)) {
      pcs.push_back(it->second.pc);
    }
    return pcs;
  }
  std::string String(uint32_t id) const {
    auto it = strings.find(id);
    return it == strings.end() ? "" : it->second;
  }
  std::string File(uint64_t pc) const {
    auto it = symbols.find(pc);
    return it == symbols.end() ? "" : String(it->second.file);
  }
  uint32_t Line(uint64_t pc) const {
    auto it = symbols.find(pc);
    return it == symbols.end() ? 0 : it->second.line;
  }
  std::string Function(uint64_t pc) const {
    auto it = symbols.find(pc);
    return it == symbols.end() ? "" : String(it->second.function);
  }
  // The allocation event of `size` bytes (the first one), or nullptr.
  const Event* Alloc(uint64_t size) const {
    for (const Event& e : events) {
      if (e.info->op == format::Op::kAlloc && e.size == size) return &e;
    }
    return nullptr;
  }
  const analyzer::ModuleInfo* Module(uint64_t pc) const {
    for (const analyzer::ModuleInfo& m : modules) {
      if (pc >= m.start && pc < m.end) return &m;
    }
    return nullptr;
  }
};

class CodeCollector : public analyzer::TraceVisitor {
 public:
  explicit CodeCollector(Code* code) : code_(code) {}
  void OnHeader(const analyzer::TraceHeader& h) override { code_->header = h; }
  void OnString(uint32_t id, const std::string& value) override { code_->strings[id] = value; }
  void OnSymbol(const analyzer::SymbolInfo& s) override { code_->symbols[s.pc] = s; }
  void OnModule(const analyzer::ModuleInfo& m) override { code_->modules.push_back(m); }
  void OnStackNode(const analyzer::StackNode& n) override { code_->nodes[n.id] = n; }
  void OnEvent(const Event& e) override { code_->events.push_back(e); }
  void OnNotice(const analyzer::NoticeInfo& n) override { code_->notices.push_back(n); }

 private:
  Code* code_;
};

Code ReadCode(const std::string& path) {
  Code code;
  CodeCollector collector(&code);
  analyzer::ReadStats stats;
  code.status = analyzer::ReadTrace(path, collector, &stats);
  return code;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// The bytes before the first Symbols packet: what a process that died at exit, before its symbols, leaves.
std::string CutBeforeSymbols(const std::string& bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<uint8_t>(bytes[i]) != 0x0a) break;
    uint64_t length = 0;
    size_t j = i + 1;
    for (int shift = 0; j < bytes.size(); shift += 7) {
      const uint8_t b = static_cast<uint8_t>(bytes[j++]);
      length |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (b < 0x80) break;
    }
    if (j < bytes.size() && (static_cast<uint8_t>(bytes[j]) >> 3) == format::field::packet::kSymbols) {
      return bytes.substr(0, i);
    }
    i = j + length;
  }
  ADD_FAILURE() << "no Symbols packet found";
  return bytes;
}

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

std::string ReadStream(std::FILE* f) {
  std::rewind(f);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

// cumem-analyze in-process, from folder `cwd` when given.
CliResult Cli(const std::vector<std::string>& args, const std::string& cwd = "") {
  const fs::path before = fs::current_path();
  if (!cwd.empty()) fs::current_path(cwd);
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  CliResult r;
  r.status = analyzer::RunCli(args, out, err);
  r.out = ReadStream(out);
  r.err = ReadStream(err);
  fs::current_path(before);
  return r;
}

std::string MakeTempDir(const std::string& name) {
  std::string pattern = testing::TempDir() + "cumemtrace_symbols_" + name + "_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << pattern;
  return pattern;
}

void CopyExecutable(const std::string& from, const std::string& to) {
  fs::create_directories(fs::path(to).parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  fs::permissions(to, fs::perms::owner_all, fs::perm_options::add);
}

RunResult RunLines(const std::vector<std::pair<std::string, std::string>>& env = {},
                   const std::string& program_path = "", const std::vector<std::string>& args = {}) {
  RunOptions options;
  options.program = "lines";
  options.env = env;
  options.program_path = program_path;
  options.args = args;
  RunResult run = RunProgram(options);
  EXPECT_EQ(run.exit_code, 0) << run.Describe();
  return run;
}

// Checks the three marked allocations of e2e_lines against the marked lines. `where` names the trace.
void ExpectMarkedLines(const Code& code, const std::string& where) {
  ASSERT_TRUE(code.status.ok()) << where << ": " << code.status;
  const Event* kept = code.Alloc(2 * kMiB);
  const Event* freed = code.Alloc(3 * kMiB);
  const Event* failed = code.Alloc(256 * kMiB);
  ASSERT_TRUE(kept != nullptr && freed != nullptr && failed != nullptr) << where;
  EXPECT_NE(failed->result, 0);
  const std::vector<uint64_t> kept_pcs = code.Pcs(kept->stack);
  ASSERT_GE(kept_pcs.size(), 2u) << where;
  ASSERT_FALSE(code.File(kept_pcs[0]).empty()) << where << ": no file for the innermost frame";
  EXPECT_TRUE(fs::equivalent(code.File(kept_pcs[0]), LinesSource())) << where << ": " << code.File(kept_pcs[0]);
  EXPECT_EQ(code.Line(kept_pcs[0]), static_cast<uint32_t>(MarkedLine("kept"))) << where;
  EXPECT_TRUE(fs::equivalent(code.File(kept_pcs[1]), LinesSource())) << where;
  EXPECT_EQ(code.Line(kept_pcs[1]), static_cast<uint32_t>(MarkedLine("main-kept"))) << where;
  EXPECT_NE(code.Function(kept_pcs[0]).find("AllocateKept"), std::string::npos) << where;
  const std::vector<uint64_t> freed_pcs = code.Pcs(freed->stack);
  ASSERT_FALSE(freed_pcs.empty());
  EXPECT_EQ(code.Line(freed_pcs[0]), static_cast<uint32_t>(MarkedLine("freed"))) << where;
  const std::vector<uint64_t> failed_pcs = code.Pcs(failed->stack);
  ASSERT_FALSE(failed_pcs.empty());
  EXPECT_EQ(code.Line(failed_pcs[0]), static_cast<uint32_t>(MarkedLine("failed"))) << where;
}

TEST(E2eLines, PreloadWritesFileAndLineOfTheProgramsOwnFrames) {
  const RunResult run = RunLines();
  const Code code = ReadCode(run.trace_path);
  ExpectMarkedLines(code, "the preload's trace");
  int notices = 0;
  for (const analyzer::NoticeInfo& n : code.notices) {
    if (n.code != format::NoticeCode::kSymbolsFromDebugInfo) continue;
    ++notices;
    EXPECT_TRUE(absl::StartsWith(n.message, "file and line from debug info for ")) << n.message;
  }
  EXPECT_EQ(notices, 1);

  // libc's frames get theirs from its debug file under /usr/lib/debug/.build-id, where that is installed.
  const Event* kept = code.Alloc(2 * kMiB);
  ASSERT_NE(kept, nullptr);
  for (uint64_t pc : code.Pcs(kept->stack)) {
    const analyzer::ModuleInfo* m = code.Module(pc);
    if (m == nullptr || !absl::StartsWith(std::string(fs::path(m->path).filename()), "libc.so")) continue;
    if (!fs::exists(analyzer::BuildIdDebugPath("/usr/lib/debug", m->build_id))) {
      GTEST_LOG_(INFO) << "no debug file for libc here: its frames were not checked";
      break;
    }
    EXPECT_FALSE(code.File(pc).empty()) << "libc frame without a file although its debug file is installed";
  }
  RemoveRunDir(run);
}

// libdw is only ever dlopen'ed: the preload's DT_NEEDED entries stay libc's, libunwind's (and never libstdc++).
TEST(E2eLines, PreloadNeedsNeitherLibdwNorLibstdcxx) {
  std::FILE* pipe = popen(("readelf -d '" + std::string(E2E_PRELOAD) + "' 2>/dev/null").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0;) text.append(buf, n);
  if (pclose(pipe) != 0 || text.empty()) GTEST_SKIP() << "readelf is not available";
  std::vector<std::string> needed;
  static const std::regex kNeeded(R"re(\(NEEDED\)\s+Shared library: \[([^\]]+)\])re");
  for (std::sregex_iterator it(text.begin(), text.end(), kNeeded), end; it != end; ++it) {
    needed.push_back((*it)[1].str());
  }
  ASSERT_FALSE(needed.empty()) << text;
  for (const std::string& library : needed) {
    EXPECT_TRUE(library == "libc.so.6" || library == "libunwind.so.8" || library == "libdl.so.2" ||
                library == "libpthread.so.0")
        << "unexpected DT_NEEDED " << library;
  }
}

TEST(E2eLines, LinesOffWritesNamesOnlyAndSaysNothing) {
  const RunResult run = RunLines({{"CUMEMTRACE_LINES", "0"}});
  const Code code = ReadCode(run.trace_path);
  ASSERT_TRUE(code.status.ok()) << code.status;
  ASSERT_FALSE(code.symbols.empty());
  for (const auto& [pc, symbol] : code.symbols) EXPECT_EQ(symbol.file, 0u) << std::hex << pc;
  for (const analyzer::NoticeInfo& n : code.notices) {
    EXPECT_NE(n.code, format::NoticeCode::kSymbolsFromDebugInfo) << n.message;
  }
  const Event* kept = code.Alloc(2 * kMiB);
  ASSERT_NE(kept, nullptr);
  EXPECT_NE(code.Function(code.Pcs(kept->stack)[0]).find("AllocateKept"), std::string::npos);
  RemoveRunDir(run);
}

TEST(E2eLines, SymbolizeRestoresFileAndLineOfATraceCutBeforeItsSymbols) {
  const RunResult run = RunLines();
  const std::string cut = run.dir + "/cut.pb";
  const std::string whole = ReadBytes(run.trace_path);
  WriteBytes(cut, CutBeforeSymbols(whole));
  ASSERT_TRUE(ReadCode(cut).symbols.empty());

  const CliResult r = Cli({"symbolize", cut});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string out_path = run.dir + "/cut.symbolized.pb";
  EXPECT_TRUE(absl::StrContains(r.out, "wrote " + out_path)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "modules missing: 0")) << r.out;
  const Code symbolized = ReadCode(out_path);
  ExpectMarkedLines(symbolized, "the symbolized copy");

  // Every file and line the preload wrote, symbolize finds too; the events are the same.
  const Code original = ReadCode(run.trace_path);
  for (const auto& [pc, symbol] : original.symbols) {
    if (symbol.file == 0) continue;
    EXPECT_EQ(symbolized.File(pc), original.File(pc)) << std::hex << pc;
    EXPECT_EQ(symbolized.Line(pc), original.Line(pc)) << std::hex << pc;
  }
  EXPECT_EQ(symbolized.events.size(), original.events.size());

  const std::string before = ReadBytes(out_path);
  const CliResult again = Cli({"symbolize", cut});
  EXPECT_EQ(again.status, 2);
  EXPECT_EQ(again.err, "cumem-analyze: " + out_path + " exists; not overwriting it\n");
  EXPECT_EQ(ReadBytes(out_path), before);
  RemoveRunDir(run);
}

TEST(E2eLines, SymbolizeFindsAMovedBinaryInADebugDirOnlyWhenItsBuildIdMatches) {
  const std::string work = MakeTempDir("moved");
  const std::string program = work + "/bin/e2e_lines";
  CopyExecutable(ProgramPath("lines"), program);
  const RunResult run = RunLines({}, program);
  const std::string cut = work + "/cut.pb";
  WriteBytes(cut, CutBeforeSymbols(ReadBytes(run.trace_path)));
  const Code code = ReadCode(cut);
  std::string build_id;
  for (const analyzer::ModuleInfo& m : code.modules) {
    if (m.path == program) build_id = m.build_id;
  }
  ASSERT_FALSE(build_id.empty());
  fs::remove(program);

  // Gone, and nothing to look in: missing, by path and build id.
  CliResult r = Cli({"symbolize", cut, "-o", work + "/none.pb"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, program + " (build id " + analyzer::HexBuildId(build_id) + ")")) << r.out;
  const Code none = ReadCode(work + "/none.pb");
  const Event* kept = none.Alloc(2 * kMiB);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(none.File(none.Pcs(kept->stack)[0]), "");

  // Another program under the same name: its build id differs, so it is not taken.
  CopyExecutable(ProgramPath("direct"), work + "/wrong/e2e_lines");
  r = Cli({"symbolize", cut, "--debug-dir", work + "/wrong", "-o", work + "/wrong.pb"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "modules missing: 1")) << r.out;

  // The same binary in a debug folder, by name.
  CopyExecutable(ProgramPath("lines"), work + "/debug/e2e_lines");
  r = Cli({"symbolize", cut, "--debug-dir", work + "/wrong", "--debug-dir", work + "/debug", "-o",
           work + "/by_name.pb"});
  ASSERT_EQ(r.status, 0) << r.err;
  ExpectMarkedLines(ReadCode(work + "/by_name.pb"), "symbolized from a debug folder by name");

  // Only its debug info, by build id (objcopy --only-keep-debug, as debug packages hold it).
  const std::string by_id = analyzer::BuildIdDebugPath(work + "/ids", build_id);
  fs::create_directories(fs::path(by_id).parent_path());
  const std::string objcopy = "objcopy --only-keep-debug '" + ProgramPath("lines") + "' '" + by_id + "'";
  if (std::system(objcopy.c_str()) == 0) {
    r = Cli({"symbolize", cut, "--debug-dir", work + "/ids", "-o", work + "/by_id.pb"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, "as " + by_id)) << r.out;
    ExpectMarkedLines(ReadCode(work + "/by_id.pb"), "symbolized from a .build-id debug file");
  } else {
    GTEST_LOG_(INFO) << "no objcopy: the .build-id lookup was not checked";
  }
  RemoveRunDir(run);
  fs::remove_all(work);
}

// JSON with every string literal reduced to its last path component (after "=" in "--flag=path"), and the file size (which redaction changes)
// masked: what must be equal between a trace and its redacted copy.
std::string PathFreeJson(const std::string& json) {
  static const std::regex kString(R"re("((?:[^"\\]|\\.)*)")re");
  static const std::regex kFileBytes(R"("file_bytes": [0-9]+)");
  std::string out;
  auto last = json.cbegin();
  for (std::sregex_iterator it(json.begin(), json.end(), kString), end; it != end; ++it) {
    out.append(last, json.cbegin() + it->position());
    // "--flag=/a/b" keeps its "--flag=".
    const std::string value = (*it)[1].str();
    const size_t slash = value.rfind('/');
    const size_t eq = value.find('=');
    const std::string prefix = eq != std::string::npos && eq < value.find('/') ? value.substr(0, eq + 1) : "";
    out += "\"" + prefix + value.substr(slash == std::string::npos ? prefix.size() : slash + 1) + "\"";
    last = json.cbegin() + it->position() + it->length();
  }
  out.append(last, json.cend());
  return std::regex_replace(out, kFileBytes, "\"file_bytes\": 0");
}

TEST(E2eRedact, SameReportsWithoutHostHomeOrOutsidePaths) {
  const std::string work = MakeTempDir("redact");
  const std::string home = work + "/home/" + kFakeUser;
  const std::string program = home + "/proj/e2e_lines";
  CopyExecutable(ProgramPath("lines"), program);
  const std::string preload = std::string(E2E_HOSTNAME_SHIM) + ":" + E2E_PRELOAD;
  const RunResult run = RunLines({{"LD_PRELOAD", preload}, {"HOME", home}}, program,
                                 {"--data=" + home + "/data/in.bin", std::string(E2E_FAKE_CUDA_DIR) + "/notes.txt",
                                  "steps=3"});
  const std::string original = ReadBytes(run.trace_path);
  // The oracle is meaningful: the original holds the host name and the home folder.
  ASSERT_TRUE(absl::StrContains(original, kFakeHost));
  ASSERT_TRUE(absl::StrContains(original, kFakeUser));

  fs::create_directories(work + "/redacted");
  const std::string redacted = work + "/redacted/" + fs::path(run.trace_path).filename().string();
  const CliResult r = Cli({"redact", run.trace_path, "-o", redacted});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string bytes = ReadBytes(redacted);
  for (const std::string& secret : {std::string(kFakeHost), std::string(kFakeUser), home,
                                    std::string(E2E_FAKE_CUDA_DIR), std::string(E2E_SOURCE_DIR)}) {
    EXPECT_FALSE(absl::StrContains(bytes, secret)) << "the redacted trace still holds " << secret;
  }

  const Code code = ReadCode(redacted);
  ASSERT_TRUE(code.status.ok()) << code.status;
  EXPECT_EQ(code.header.hostname, "");
  EXPECT_EQ(code.header.argv, (std::vector<std::string>{"e2e_lines", "--data=in.bin", "notes.txt", "steps=3"}));
  EXPECT_EQ(code.header.executable, "e2e_lines");
  bool saw_program = false, saw_fake_driver = false;
  for (const analyzer::ModuleInfo& m : code.modules) {
    EXPECT_EQ(m.path.find('/'), std::string::npos) << m.path;
    saw_program |= m.path == "e2e_lines";
    saw_fake_driver |= m.path == "libcuda.so.1";
  }
  EXPECT_TRUE(saw_program);
  EXPECT_TRUE(saw_fake_driver);
  const Event* kept = code.Alloc(2 * kMiB);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(code.File(code.Pcs(kept->stack)[0]), "lines.cc");  // the source lies outside the program's folder
  EXPECT_EQ(code.Line(code.Pcs(kept->stack)[0]), static_cast<uint32_t>(MarkedLine("kept")));

  for (const std::string command : {"peak", "leaks", "oom"}) {
    const CliResult a = Cli({command, "--json", run.trace_path});
    const CliResult b = Cli({command, "--json", redacted});
    ASSERT_EQ(a.status, 0) << a.err;
    ASSERT_EQ(b.status, 0) << b.err;
    std::string expected = a.out;
    for (size_t at; (at = expected.find(kFakeHost)) != std::string::npos;) expected.erase(at, sizeof(kFakeHost) - 1);
    EXPECT_EQ(PathFreeJson(b.out), PathFreeJson(expected)) << command;
    EXPECT_FALSE(absl::StrContains(b.out, kFakeUser)) << command;
  }
  RemoveRunDir(run);
  fs::remove_all(work);
}

TEST(E2ePortability, JsonIsIdenticalFromAFreshFolderWithTheBinariesGone) {
  const std::string work = MakeTempDir("portable");
  const std::string program = work + "/bin/e2e_lines";
  CopyExecutable(ProgramPath("lines"), program);
  for (const auto& entry : fs::directory_iterator(E2E_FAKE_CUDA_DIR)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && absl::StartsWith(name, "lib") && absl::StrContains(name, ".so")) {
      fs::create_directories(work + "/lib");
      fs::copy_file(entry.path(), work + "/lib/" + name);
    }
  }
  const RunResult run = RunLines({{"LD_LIBRARY_PATH", work + "/lib"}}, program);
  const Code code = ReadCode(run.trace_path);
  bool program_module = false, driver_module = false;
  for (const analyzer::ModuleInfo& m : code.modules) {
    program_module |= m.path == program;
    driver_module |= m.path == work + "/lib/libcuda.so.1";
  }
  ASSERT_TRUE(program_module && driver_module) << "the trace should name the copies in " << work;

  const std::string name = fs::path(run.trace_path).filename().string();
  std::vector<std::string> before;
  for (const std::string command : {"summary", "leaks", "oom"}) {
    const CliResult r = Cli({command, "--json", name}, run.dir);
    ASSERT_EQ(r.status, 0) << r.err;
    before.push_back(r.out);
  }
  EXPECT_TRUE(absl::StrContains(before[1], "lines.cc")) << "file and line expected in the leaks report";

  const std::string fresh = MakeTempDir("fresh");
  fs::copy_file(run.trace_path, fresh + "/" + name);
  fs::rename(work, work + ".gone");
  RemoveRunDir(run);
  size_t i = 0;
  for (const std::string command : {"summary", "leaks", "oom"}) {
    const CliResult r = Cli({command, "--json", name}, fresh);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, before[i++]) << command;
  }
  fs::remove_all(work + ".gone");
  fs::remove_all(fresh);
}

}  // namespace
}  // namespace cumemtrace::e2e
