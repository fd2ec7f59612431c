// Traces that survive what long jobs meet (issue 26):
// - CUMEMTRACE_OVERWRITE=1 replaces only a regular file (or nothing): a device, a FIFO, a directory or a symbolic
//   link at the trace's name is left exactly as it was, with one warning, and the program runs as it would
//   untraced (the errno program checks its errno and results itself and ends with exit code 3 on purpose);
// - a file size limit smaller than what the first batch needs keeps the largest prefix of whole packets that fits,
//   never sends the program SIGXFSZ, and the analyzer reads what was kept as a trace that ends early;
// - a damaged header does not lose the trace: the preload repeats what a reader needs, and the reader uses the
//   copy and warns.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analyzer/commands/run_cli.h"
#include "e2e_support.h"
#include "proto/format.h"

namespace cumemtrace::e2e {
namespace {

namespace fs = std::filesystem;

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
                             {"CUMEMTRACE_COMPRESS", "0"},  // batches as large as their events: the limit is met
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

// A trace of 800 000 events (several MiB) holds copies of what a reader needs of its header: one in the first unit
// after the header's, about one per MiB, one before the trailer; each is small.
TEST(E2eHeaderCopies, TheHeaderIsRepeatedCheaply) {
  // Plain batches: the trace is then several MiB, as a real run's is once it runs long enough.
  const RunResult run = RunProgram({.program = "storm",
                                    .env = {{"FAKE_CUDA_LEDGER", ""}, {"CUMEMTRACE_COMPRESS", "0"}},
                                    .args = {"threads", "1", "400000"}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::string bytes = Slurp(run.trace_path);
  const std::vector<FramedPacket> packets = Packets(bytes);
  ASSERT_GE(packets.size(), 3u);
  EXPECT_EQ(packets[0].field, format::field::packet::kHeader);
  EXPECT_EQ(packets.back().field, format::field::packet::kTrailer);
  EXPECT_EQ(packets[packets.size() - 2].field, format::field::packet::kHeaderCopy) << "no copy before the trailer";
  size_t copies = 0, copy_bytes = 0, largest_gap = 0, previous = 0;
  for (const FramedPacket& p : packets) {
    if (p.field != format::field::packet::kHeaderCopy) continue;
    ++copies;
    copy_bytes += p.bytes;
    EXPECT_LE(p.bytes, 127u);
    largest_gap = std::max(largest_gap, p.start - previous);
    previous = p.start;
  }
  const double mib = static_cast<double>(bytes.size()) / (1 << 20);
  ASSERT_GT(mib, 2.0);
  // One per MiB (from the end of a unit on), the first unit's, the trailer's.
  EXPECT_GE(copies, static_cast<size_t>(mib));
  EXPECT_LE(copies, static_cast<size_t>(mib) + 3);
  EXPECT_LE(largest_gap, (size_t{1} << 20) + (size_t{512} << 10)) << "a unit is far less than 512 KiB here";
  EXPECT_LT(static_cast<double>(copy_bytes) / static_cast<double>(bytes.size()), 1e-4);
  RecordProperty("trace_bytes", std::to_string(bytes.size()));
  RecordProperty("header_copies", std::to_string(copies));
  RecordProperty("header_copy_bytes", std::to_string(copy_bytes));
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// Damage to the header (a flipped magic byte, a wrong length, a zeroed start) used to lose the whole trace; now
// the first copy stands in for it: every event, thread and symbol is read, the header's pid and start time are
// the copy's, the command line is unknown, and the damage is counted and said.
TEST(E2eHeaderCopies, ADamagedHeaderCostsOnlyItsOwnFields) {
  const RunResult run = RunProgram({.program = "direct"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const CollectedTrace intact = CollectTrace(run.trace_path);
  ASSERT_TRUE(intact.status.ok()) << intact.status;
  ASSERT_FALSE(intact.stats.header_recovered);
  ASSERT_FALSE(intact.header.argv.empty());
  std::vector<LedgerEntry> ledger;
  ASSERT_TRUE(ReadLedger(run.ledger_path, &ledger).ok());
  ASSERT_EQ(MultisetDifference(LedgerKeys(ledger, true), EventKeys(intact, true)), "");
  const std::string bytes = Slurp(run.trace_path);
  const std::vector<FramedPacket> packets = Packets(bytes);
  ASSERT_GE(packets.size(), 2u);
  const size_t header_bytes = packets[1].start;
  size_t first_copy = 0;
  for (const FramedPacket& p : packets) {
    if (p.field == format::field::packet::kHeaderCopy && first_copy == 0) first_copy = p.start;
  }
  ASSERT_GT(first_copy, header_bytes);

  struct Damage {
    const char* name;
    std::string bytes;
  };
  std::vector<Damage> damages;
  {
    std::string b = bytes;
    const size_t magic = b.find(std::string(reinterpret_cast<const char*>(&format::kMagic), 8));
    ASSERT_LT(magic, header_bytes);
    b[magic + 3] ^= 0x20;
    damages.push_back({"magic", b});
  }
  {
    std::string b = bytes;
    b[1] = static_cast<char>(0xff);  // the header's length: now longer than the file
    b[2] = static_cast<char>(0xff);
    damages.push_back({"length", b});
  }
  {
    std::string b = bytes;
    for (size_t i = 0; i < 48; ++i) b[i] = 0;
    damages.push_back({"zeroed", b});
  }
  {
    std::string b = bytes;
    b[0] = 0x0b;  // not a packet tag
    damages.push_back({"tag", b});
  }
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    const CollectedTrace trace = CollectTrace(WriteDamaged(run, std::string("damaged-") + d.name + ".pb", d.bytes));
    ASSERT_TRUE(trace.status.ok()) << trace.status;
    EXPECT_TRUE(trace.stats.header_recovered);
    EXPECT_EQ(trace.stats.header_copy_at, first_copy);
    EXPECT_EQ(trace.header.pid, run.pid);
    EXPECT_EQ(trace.header.ppid, intact.header.ppid);
    EXPECT_EQ(trace.header.start_time_ns, intact.header.start_time_ns);
    EXPECT_EQ(trace.header.start_unix_time_ns, intact.header.start_unix_time_ns);
    EXPECT_EQ(trace.header.stack_depth, intact.header.stack_depth);
    EXPECT_EQ(trace.header.format_version, format::kFormatVersion);
    EXPECT_TRUE(trace.header.argv.empty());
    EXPECT_TRUE(trace.header.hostname.empty());
    EXPECT_EQ(trace.stats.damaged_packets, 1u);
    EXPECT_EQ(trace.stats.first_damage_at, 0u);
    EXPECT_NE(trace.stats.first_damage.find("header is damaged"), std::string::npos) << trace.stats.first_damage;
    EXPECT_NE(trace.stats.first_damage.find("command line"), std::string::npos) << trace.stats.first_damage;
    EXPECT_GE(trace.stats.skipped_bytes, header_bytes - 3);
    EXPECT_LE(trace.stats.skipped_bytes, header_bytes);
    EXPECT_EQ(trace.events.size(), intact.events.size());
    EXPECT_EQ(MultisetDifference(LedgerKeys(ledger, true), EventKeys(trace, true)), "");
    EXPECT_EQ(trace.stack_nodes.size(), intact.stack_nodes.size());
    EXPECT_EQ(trace.strings.size(), intact.strings.size());
    EXPECT_EQ(trace.devices.size(), intact.devices.size());
    EXPECT_TRUE(trace.has_trailer);
    EXPECT_FALSE(trace.stats.truncated);
  }
  // Damaged copies too: nothing stands in for the header, and the file is not read as a trace (as before copies).
  std::string b = damages[0].bytes;
  for (const FramedPacket& p : packets) {
    if (p.field == format::field::packet::kHeaderCopy) b[p.start + 8] ^= 0x20;  // a byte of its magic
  }
  const CollectedTrace none = CollectTrace(WriteDamaged(run, "damaged-all.pb", b));
  EXPECT_FALSE(none.status.ok());
  EXPECT_NE(none.status.message().find("not a cumemtrace trace"), std::string::npos) << none.status;
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// A header damaged so that it no longer parses still frames as a packet: `redact` must not copy it byte for byte
// (it holds the host name and the command line, here the program's absolute path). It leaves it out; the copy of
// the header stands in for it in the redacted trace too.
TEST(E2eHeaderCopies, RedactLeavesOutAHeaderItCannotParse) {
  const std::string host = ProgramPath("direct");
  const RunResult run = RunProgram({.program = "direct"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::string bytes = Slurp(run.trace_path);
  const std::vector<FramedPacket> packets = Packets(bytes);
  ASSERT_GE(packets.size(), 2u);
  ASSERT_NE(bytes.substr(0, packets[1].start).find(host), std::string::npos) << "the header names the program";
  // The header's Packet body is field 1 with a two-byte length (the command line makes it longer than 127 bytes):
  // a length past the packet's end makes it unparseable while the framing stays whole.
  ASSERT_TRUE((static_cast<uint8_t>(bytes[1]) & 0x80) != 0 && static_cast<uint8_t>(bytes[2]) < 0x80);
  ASSERT_EQ(static_cast<uint8_t>(bytes[3]), 0x0a);
  ASSERT_TRUE((static_cast<uint8_t>(bytes[4]) & 0x80) != 0 && static_cast<uint8_t>(bytes[5]) < 0x80);
  bytes[5] = 0x7f;
  const std::string damaged = WriteDamaged(run, "damaged.pb", bytes);
  ASSERT_TRUE(CollectTrace(damaged).stats.header_recovered);
  const std::string redacted = run.dir + "/redacted.pb";
  FILE* out = tmpfile();
  FILE* err = tmpfile();
  EXPECT_EQ(analyzer::RunCli({"redact", damaged, "-o", redacted}, out, err), 0);
  fclose(out);
  fclose(err);
  const std::string copy = Slurp(redacted);
  EXPECT_EQ(copy.find(host), std::string::npos) << "the redacted copy holds the program's path";
  const CollectedTrace trace = CollectTrace(redacted);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  EXPECT_TRUE(trace.stats.header_recovered);
  EXPECT_EQ(trace.stats.skipped_bytes, 0u);
  EXPECT_EQ(trace.events.size(), CollectTrace(run.trace_path).events.size());
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

}  // namespace
}  // namespace cumemtrace::e2e
