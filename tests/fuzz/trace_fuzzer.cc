// libFuzzer target: the input is a trace file's bytes. Each input is written to a file and every subcommand that
// reads a trace runs on it in-process, through RunCli, exactly as `cumem-analyze` runs it: the reports (summary,
// peak, leaks, pinned, oom, events, ranks, check, diff against itself), text and --json, and the exports (folded,
// pprof, perfetto, html, torch-snapshot). Reports go to /dev/null, exports to files in a private temporary folder.
//
// A crash, a sanitizer report (ASan, UBSan: built with -fno-sanitize-recover), a leak, a hang (-timeout), an exit
// status the tool must never give (anything but 0 and 2, an unreadable trace; check may also answer 1) or an error
// libprotobuf logs (writing an export that strict readers reject, say; the reader silences the parse errors it
// recovers from) is a finding.
// Built by tests/fuzz/build_fuzzer.sh with clang; docs/fuzzing.md says how to run it and what it found.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

#include "analyzer/commands/command_line.h"
#include "analyzer/commands/run_cli.h"
#include "google/protobuf/stubs/logging.h"

namespace {

struct Setup {
  std::string dir;
  std::string trace;
  std::FILE* sink = nullptr;
  std::vector<std::vector<std::string>> commands;
  bool one = false;  // CUMEM_FUZZ_ONE=1: each input runs one command, picked by its length (see below)
};

Setup* setup = nullptr;

std::string MakeDir() {
  std::string base = "/dev/shm";  // a file in memory when there is one: each input is written and read up to 28 times
  if (access(base.c_str(), W_OK) != 0) {
    const char* tmp = std::getenv("TMPDIR");
    base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string pattern = base + "/cumem_fuzz.XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror("cumem_fuzz: mkdtemp");
    std::abort();
  }
  return pattern;
}

void RemoveDir() {
  if (setup == nullptr) return;
  for (const char* name : {"in.pb", "out.folded", "out.pb.gz", "out.perfetto", "out.html", "out.pickle",
                           "out.json"}) {
    unlink((setup->dir + "/" + name).c_str());
  }
  rmdir(setup->dir.c_str());
}

std::vector<std::vector<std::string>> Commands(const std::string& t, const std::string& dir) {
  std::vector<std::vector<std::string>> c;
  for (const char* report : {"summary", "peak", "leaks", "pinned", "oom", "events"}) {
    c.push_back({report, t});
    c.push_back({report, t, "--json"});
  }
  c.push_back({"summary", t, "--group-by", "python", "--top", "3", "--frames", "2"});
  c.push_back({"peak", t, "--json", "--group-by", "stack"});
  c.push_back({"ranks", t, t});
  c.push_back({"ranks", t, t, "--json"});
  c.push_back({"check", t, "--max-peak", "1GiB", "--max-leak", "1", "--no-oom"});
  c.push_back({"check", t, "--max-peak", "1", "--device", "0", "--kind", "device"});
  c.push_back({"diff", t, t});
  c.push_back({"diff", t, t, "--json"});
  c.push_back({"folded", t});
  c.push_back({"folded", t, "--leaks", "--device", "host", "-o", dir + "/out.folded"});
  c.push_back({"pprof", t, "-o", dir + "/out.pb.gz"});
  c.push_back({"pprof", t, "--leaks", "--kind", "pinned_host", "-o", dir + "/out.pb.gz"});
  c.push_back({"perfetto", t, "-o", dir + "/out.perfetto"});
  c.push_back({"html", t, "-o", dir + "/out.html"});
  c.push_back({"torch-snapshot", t, "-o", dir + "/out.pickle"});
  c.push_back({"torch-snapshot", t, "--json", "-o", dir + "/out.json"});
  return c;
}

void AbortOnProtobufError(google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
  if (level < google::protobuf::LOGLEVEL_ERROR) return;
  std::fprintf(stderr, "cumem_fuzz: libprotobuf error at %s:%d: %s\n", file, line, message.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(AbortOnProtobufError);
  setup = new Setup;
  setup->dir = MakeDir();
  setup->trace = setup->dir + "/in.pb";
  setup->sink = std::fopen("/dev/null", "w");
  if (setup->sink == nullptr) std::abort();
  setup->commands = Commands(setup->trace, setup->dir);
  // Exit status 2 means bad usage as well as an unreadable trace: every argument list must parse, so that a 2 from
  // a run can only be the input.
  for (const std::vector<std::string>& args : setup->commands) {
    if (!cumemtrace::analyzer::ParseCommandLine(args).ok()) {
      std::fprintf(stderr, "cumem_fuzz: bad arguments for '%s'\n", args[0].c_str());
      std::abort();
    }
  }
  const char* one = std::getenv("CUMEM_FUZZ_ONE");
  setup->one = one != nullptr && std::string(one) == "1";
  std::atexit(RemoveDir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(setup->trace.c_str(), "wb");
  if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
    std::perror("cumem_fuzz: writing the input");
    std::abort();
  }
  // All 28 commands per input by default. For long runs, CUMEM_FUZZ_ONE=1 runs only the command numbered by the
  // input's length modulo their count: ~28 times the inputs per second, every command still reached (mutations
  // change lengths), and an input always runs the same command, so a finding reproduces without the variable too
  // (the default runs that command as well).
  size_t first = 0;
  size_t end = setup->commands.size();
  if (setup->one) {
    first = size % setup->commands.size();
    end = first + 1;
  }
  for (size_t i = first; i < end; ++i) {
    const std::vector<std::string>& args = setup->commands[i];
    const int code = cumemtrace::analyzer::RunCli(args, setup->sink, setup->sink);
    const bool check = args[0] == "check";
    if (code != cumemtrace::analyzer::kExitOk && code != cumemtrace::analyzer::kExitError &&
        !(check && code == cumemtrace::analyzer::kExitFinding)) {
      std::fprintf(stderr, "cumem_fuzz: '%s' exited with %d\n", args[0].c_str(), code);
      std::abort();
    }
  }
  return 0;
}
