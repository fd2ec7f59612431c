// Traces that survive what long jobs meet (issue 26):
// - CUMEMTRACE_OVERWRITE=1 replaces only a regular file (or nothing): a device, a FIFO, a directory or a symbolic
//   link at the trace's name is left exactly as it was, with one warning, and the program runs as it would
//   untraced (the errno program checks its errno and results itself and ends with exit code 3 on purpose);
// - a file size limit smaller than what the first batch needs keeps the largest prefix of whole packets that fits,
//   never sends the program SIGXFSZ, and the analyzer reads what was kept as a trace that ends early.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "e2e_support.h"
#include "proto/format.h"

namespace cumemtrace::e2e {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The lines of the run's stderr that the preload wrote.
std::vector<std::string> PreloadLines(const RunResult& run) {
  std::istringstream in(Slurp(run.dir + "/stderr.txt"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cumemtrace:", 0) == 0) lines.push_back(line);
  }
  return lines;
}

// A folder of its own for the thing planted at the trace's name.
std::string FreshDir(const std::string& name) {
  const std::string dir = fs::temp_directory_path() / ("cumemtrace-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void ExpectNoTemporaryFile(const std::string& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().string().find("cumemtrace-new"), std::string::npos) << "temporary file left behind";
  }
}

// Runs the errno program with its trace at `path` and CUMEMTRACE_OVERWRITE=1; expects the program to be unchanged
// and the thing at `path` not to be replaced, with exactly one warning naming `what`.
void ExpectRefused(const std::string& path, const std::string& what) {
  struct stat before {};
  ASSERT_EQ(lstat(path.c_str(), &before), 0);
  const RunResult run =
      RunProgram({.program = "errno", .env = {{"CUMEMTRACE_OUTPUT", path}, {"CUMEMTRACE_OVERWRITE", "1"}}});
  EXPECT_EQ(run.exit_code, 3) << run.Describe();  // errno's own exit code: every check inside it passed
  struct stat after {};
  ASSERT_EQ(lstat(path.c_str(), &after), 0) << path << " is gone";
  EXPECT_EQ(after.st_ino, before.st_ino) << path << " was replaced";
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_EQ(after.st_rdev, before.st_rdev);
  const std::vector<std::string> lines = PreloadLines(run);
  ASSERT_EQ(lines.size(), 1u) << run.Describe();
  EXPECT_NE(lines[0].find(what), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("not tracing"), std::string::npos) << lines[0];
  ExpectNoTemporaryFile(fs::path(path).parent_path());
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

TEST(E2eOverwrite, NeverReplacesAFifo) {
  const std::string dir = FreshDir("fifo");
  const std::string path = dir + "/trace.pb";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  ExpectRefused(path, "a FIFO");
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(path)));
  fs::remove_all(dir);
}

// What happened to the system's /dev/full: a character device at the name. Creating one needs CAP_MKNOD.
TEST(E2eOverwrite, NeverReplacesACharacterDevice) {
  const std::string dir = FreshDir("device");
  const std::string path = dir + "/full";
  if (mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
    fs::remove_all(dir);
    GTEST_SKIP() << "cannot create a device node here (needs CAP_MKNOD)";
  }
  ExpectRefused(path, "a character device");
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 7));
  fs::remove_all(dir);
}

TEST(E2eOverwrite, NeverReplacesADirectory) {
  const std::string dir = FreshDir("dir");
  const std::string path = dir + "/trace.pb";
  fs::create_directories(path);
  { std::ofstream(path + "/inside") << "kept\n"; }
  ExpectRefused(path, "a directory");
  EXPECT_EQ(Slurp(path + "/inside"), "kept\n");
  fs::remove_all(dir);
}

// A symbolic link is refused whatever it points to: replacing it would remove a name someone made on purpose
// (/dev/stdout is a link to /proc/self/fd/1, a regular file whenever stdout is redirected to one), and following it
// would write where the link's owner chose.
TEST(E2eOverwrite, NeverReplacesASymbolicLink) {
  const std::string dir = FreshDir("links");
  const std::string victim = dir + "/victim.txt";
  { std::ofstream(victim) << "precious\n"; }
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& target : {victim, fifo, dir + "/nothing"}) {
    SCOPED_TRACE(target);
    const std::string link = dir + "/trace.pb";
    fs::create_symlink(target, link);
    ExpectRefused(link, "a symbolic link");
    EXPECT_TRUE(fs::is_symlink(link));
    EXPECT_EQ(fs::read_symlink(link).string(), target);
    fs::remove(link);
  }
  EXPECT_EQ(Slurp(victim), "precious\n");
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
  fs::remove_all(dir);
}

// A regular file is replaced by a new private file; a second hard link to the old one keeps the old contents.
TEST(E2eOverwrite, ReplacesARegularFile) {
  const std::string dir = FreshDir("regular");
  const std::string path = dir + "/trace.pb";
  { std::ofstream(path) << "an old trace\n"; }
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  ASSERT_EQ(link(path.c_str(), (dir + "/other-name").c_str()), 0);
  const RunResult run =
      RunProgram({.program = "errno", .env = {{"CUMEMTRACE_OUTPUT", path}, {"CUMEMTRACE_OVERWRITE", "1"}}});
  EXPECT_EQ(run.exit_code, 3) << run.Describe();
  EXPECT_TRUE(PreloadLines(run).empty()) << run.Describe();
  struct stat st {};
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_nlink, 1u);
  EXPECT_EQ(Slurp(dir + "/other-name"), "an old trace\n");
  const CollectedTrace trace = CollectTrace(path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  EXPECT_TRUE(trace.has_trailer);
  std::vector<LedgerEntry> ledger;
  ASSERT_TRUE(ReadLedger(run.ledger_path, &ledger).ok());
  EXPECT_EQ(MultisetDifference(LedgerKeys(ledger, false), EventKeys(trace, false)), "");
  ExpectNoTemporaryFile(dir);
  fs::remove_all(dir);
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

constexpr uint64_t kFileSizeLimit = 16 * 1024;  // bash's `ulimit -f 16` (KiB)

// e2e_storm with one thread: N x (cuMemAlloc 512 B, cuMemFree), the same address every time, under a 16 KiB file
// size limit, with the program's own signal dispositions (SIGXFSZ not ignored). Without a periodic flush the events
// reach the file when 8192 are buffered (the flush thread writes them) and at exit (the main thread does).
RunResult RunUnderFileSizeLimit(int pairs) {
  return RunProgram({.program = "storm",
                     .env = {{"FAKE_CUDA_LEDGER", ""},  // the ledger would meet the limit too
                             {"CUMEMTRACE_FLUSH_MS", "600000"},
                             {"CUMEMTRACE_STACK_DEPTH", "4"}},
                     .program_path = "/bin/bash",
                     .args = {"-c", "ulimit -f 16 && exec \"$0\" threads 1 " + std::to_string(pairs),
                              ProgramPath("storm")}});
}

// What the trace must hold a prefix of: the same program, untraced by any limit, with the fake driver's ledger.
std::vector<std::string> ReferenceKeys(int pairs) {
  const RunResult run = RunProgram({.program = "storm", .args = {"threads", "1", std::to_string(pairs)}});
  EXPECT_EQ(run.exit_code, 0) << run.Describe();
  std::vector<LedgerEntry> ledger;
  EXPECT_TRUE(ReadLedger(run.ledger_path, &ledger).ok());
  EXPECT_EQ(ledger.size(), 2u * pairs);
  RemoveRunDir(run);
  return LedgerKeys(ledger, false);
}

void ExpectLargestPrefixKept(int pairs) {
  const std::vector<std::string> reference = ReferenceKeys(pairs);
  const RunResult run = RunUnderFileSizeLimit(pairs);
  EXPECT_EQ(run.term_signal, 0) << "the preload's write sent the program SIGXFSZ\n" << run.Describe();
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::string path = run.dir + "/trace." + std::to_string(run.pid) + ".pb";
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0) << run.Describe();
  EXPECT_LE(static_cast<uint64_t>(st.st_size), kFileSizeLimit);
  // Whole packets up to 256 bytes below the limit, then the notice: only a few bytes short of the room.
  EXPECT_GT(static_cast<uint64_t>(st.st_size), kFileSizeLimit - 512);
  const CollectedTrace trace = CollectTrace(path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  EXPECT_TRUE(trace.has_header);
  EXPECT_EQ(trace.header.pid, run.pid);
  EXPECT_FALSE(trace.has_trailer);
  EXPECT_FALSE(trace.stats.truncated) << "whole packets only";
  EXPECT_EQ(trace.stats.damaged_packets, 0u);
  bool noted = false;
  for (const analyzer::NoticeInfo& n : trace.notices) {
    noted = noted || (n.code == format::NoticeCode::kWriteFailed && n.message.find("File too large") != std::string::npos);
  }
  EXPECT_TRUE(noted) << "no write_failed notice";
  // The events kept are exactly the first ones the program made, as many as fit (16 KiB holds a few thousand).
  const std::vector<std::string> kept = EventKeys(trace, false);
  EXPECT_GT(kept.size(), 1000u);
  ASSERT_LT(kept.size(), reference.size());
  EXPECT_EQ(kept, std::vector<std::string>(reference.begin(), reference.begin() + kept.size()));
  const std::vector<std::string> lines = PreloadLines(run);
  ASSERT_GE(lines.size(), 1u) << run.Describe();
  EXPECT_NE(lines[0].find("File too large"), std::string::npos) << lines[0];
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// 12 000 events: the flush thread writes the first 8192 and finds they do not fit.
TEST(E2eFileSizeLimit, KeepsTheWholePacketsThatFitWhenTheFlushThreadWrites) { ExpectLargestPrefixKept(6000); }

// 6 000 events, all written at exit by the program's main thread: the write past the limit used to end the program
// with SIGXFSZ (exit status 153 under bash), and the file had no event.
TEST(E2eFileSizeLimit, KeepsTheWholePacketsThatFitWhenTheProgramsThreadWrites) { ExpectLargestPrefixKept(3000); }

}  // namespace
}  // namespace cumemtrace::e2e
