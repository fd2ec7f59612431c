// A damaged real trace (examples/, captured on a GPU) costs the damaged packet, never the file: cut at every byte
// offset it reads up to its last whole packet; one byte inserted anywhere inside its last packets (after all its
// events) still gives every event, with the damage counted. Issue 10, item 4.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "analyzer/reader/trace_reader.h"
#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class Counter : public TraceVisitor {
 public:
  void OnEvent(const Event&) override { ++events; }
  uint64_t events = 0;
};

// Reads `bytes` as a trace file; returns the events delivered (the status and stats through the pointers).
uint64_t ReadBytes(const std::string& bytes, absl::Status* status, ReadStats* stats) {
  const std::string path = testing::TempDir() + "/damage_" + std::to_string(getpid()) + ".pb";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  Counter c;
  *status = ReadTrace(path, c, stats);
  unlink(path.c_str());
  return c.events;
}

// Start offsets of the whole packets of `bytes` (tag 0x0a, varint length).
std::vector<size_t> PacketStarts(const std::string& bytes) {
  std::vector<size_t> starts;
  size_t pos = 0;
  while (pos < bytes.size() && static_cast<uint8_t>(bytes[pos]) == 0x0a) {
    starts.push_back(pos);
    ++pos;
    uint64_t length = 0;
    for (int shift = 0; pos < bytes.size() && shift < 64; shift += 7) {
      const uint8_t byte = static_cast<uint8_t>(bytes[pos++]);
      length |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) break;
    }
    pos += length;
  }
  return starts;
}

constexpr const char* kTrace = "story_leak_h200.pb";

TEST(DamagedExample, CutAtEveryOffsetReadsUpToTheLastWholePacket) {
  const std::string bytes = Slurp(std::string(CUMEMTRACE_EXAMPLES_DIR) + "/" + kTrace);
  ASSERT_GT(bytes.size(), 1000u);
  absl::Status status;
  ReadStats full_stats;
  const uint64_t all = ReadBytes(bytes, &status, &full_stats);
  ASSERT_TRUE(status.ok()) << status;
  const size_t header_end = PacketStarts(bytes).at(1);
  uint64_t previous = 0;
  for (size_t cut = header_end; cut < bytes.size(); ++cut) {
    ReadStats stats;
    const uint64_t events = ReadBytes(bytes.substr(0, cut), &status, &stats);
    ASSERT_TRUE(status.ok()) << "cut at " << cut << ": " << status;
    ASSERT_GE(events, previous) << "cut at " << cut << ": fewer events than a shorter cut";
    ASSERT_EQ(stats.damaged_packets, 0u) << "cut at " << cut << ": a cut is not damage";
    previous = events;
  }
  EXPECT_EQ(previous, all);
}

TEST(DamagedExample, InsertedByteInTheLastPacketsKeepsEveryEvent) {
  const std::string bytes = Slurp(std::string(CUMEMTRACE_EXAMPLES_DIR) + "/" + kTrace);
  absl::Status status;
  ReadStats full_stats;
  const uint64_t all = ReadBytes(bytes, &status, &full_stats);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<size_t> starts = PacketStarts(bytes);
  ASSERT_GE(starts.size(), 3u);
  // From the start of the last packet that holds no events (symbols, trailer) to the end of the file.
  const size_t from = starts[starts.size() - 2];
  for (size_t at = from; at < bytes.size(); ++at) {
    for (const char inserted : {'\x00', '\x0a', '\x7f', '\xff'}) {
      std::string damaged = bytes;
      damaged.insert(at, 1, inserted);
      ReadStats stats;
      const uint64_t events = ReadBytes(damaged, &status, &stats);
      ASSERT_TRUE(status.ok()) << "byte inserted at " << at << ": " << status;
      ASSERT_EQ(events, all) << "byte inserted at " << at;
    }
  }
}

// A trace whose batches are one zstd stream (format 6) cut anywhere: every part before the cut inflates, the
// part the cut falls in is lost whole (and with it nothing of the parts before it), and a cut is never damage.
// Cut at every packet's start and in the middle of every packet, since a cut at every byte of this larger trace
// would take minutes.
TEST(DamagedExample, AStreamedTraceCutAnywhereReadsEveryPartBeforeTheCut) {
  const std::string bytes = Slurp(std::string(CUMEMTRACE_EXAMPLES_DIR) + "/long_run_10us_h100.pb");
  absl::Status status;
  ReadStats full_stats;
  const uint64_t all = ReadBytes(bytes, &status, &full_stats);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_GT(all, 0u);
  const std::vector<size_t> starts = PacketStarts(bytes);
  uint64_t previous = 0;
  for (size_t i = 1; i < starts.size(); ++i) {
    const size_t end = i + 1 < starts.size() ? starts[i + 1] : bytes.size();
    ReadStats at_start, in_middle;
    const uint64_t before = ReadBytes(bytes.substr(0, starts[i]), &status, &at_start);
    ASSERT_TRUE(status.ok()) << "cut at " << starts[i] << ": " << status;
    const uint64_t inside = ReadBytes(bytes.substr(0, (starts[i] + end) / 2), &status, &in_middle);
    ASSERT_TRUE(status.ok()) << "cut at " << (starts[i] + end) / 2 << ": " << status;
    ASSERT_EQ(inside, before) << "packet " << i << ": a cut inside it changes what the packets before it give";
    ASSERT_GE(before, previous) << "packet " << i;
    ASSERT_EQ(at_start.damaged_packets + in_middle.damaged_packets, 0u) << "packet " << i << ": a cut is not damage";
    ASSERT_EQ(at_start.undecodable_batches + in_middle.undecodable_batches, 0u) << "packet " << i;
    previous = before;
  }
  EXPECT_LE(previous, all);
  EXPECT_GT(previous, all / 2);
}

// Traces written before header copies existed read as before: intact, with nothing recovered; with a damaged
// header, not as a trace (there is nothing to stand in for it), with the same error as ever.
TEST(DamagedExample, AHeaderWithoutCopiesIsStillTheOnlyOne) {
  const std::string bytes = Slurp(std::string(CUMEMTRACE_EXAMPLES_DIR) + "/" + kTrace);
  absl::Status status;
  ReadStats stats;
  ASSERT_GT(ReadBytes(bytes, &status, &stats), 0u);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_FALSE(stats.header_recovered);
  std::string damaged = bytes;
  damaged[PacketStarts(bytes).at(0) + 8] ^= 0x20;  // a byte of the header's magic
  ReadBytes(damaged, &status, &stats);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("not a cumemtrace trace"), std::string::npos) << status;
}

}  // namespace
}  // namespace cumemtrace::analyzer
