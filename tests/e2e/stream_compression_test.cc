// Event batches as one zstd stream (trace format 6, packet events_stream) and times at a coarser resolution
// (CUMEMTRACE_TIME_RESOLUTION), end to end with the fake driver: what is read back is every event the program made
// (its ledger), a damaged packet costs only the rest of its frame, and times are the ones asked for.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "e2e_support.h"
#include "proto/format.h"

namespace cumemtrace::e2e {
namespace {

// Several MiB of batches: more than one frame (the preload starts one every 4 MiB of batches).
const std::vector<std::string> kStormArgs = {"threads", "2", "300000"};

// The part number of an events_stream packet (trace.proto's StreamedEvents.part; absent = 0).
uint32_t StreamPart(const std::string& bytes, const FramedPacket& packet) {
  size_t pos = packet.start + 1;
  Varint(bytes, &pos);  // the packet's length
  Varint(bytes, &pos);  // the events_stream tag
  Varint(bytes, &pos);  // its length
  if (static_cast<uint8_t>(bytes[pos]) != ((format::field::streamed_events::kPart << 3) | 0)) return 0;
  ++pos;
  return static_cast<uint32_t>(Varint(bytes, &pos));
}

std::vector<const FramedPacket*> StreamParts(const std::vector<FramedPacket>& packets) {
  std::vector<const FramedPacket*> parts;
  for (const FramedPacket& p : packets) {
    if (p.field == format::field::packet::kEventsStream) parts.push_back(&p);
  }
  return parts;
}

// What of `actual` is not in `expected` (multisets), as text; "" when actual is a sub-multiset.
std::string NotIn(const std::vector<std::string>& expected, const std::vector<std::string>& actual) {
  std::map<std::string, int64_t> left;
  for (const std::string& k : expected) ++left[k];
  std::string out;
  for (const std::string& k : actual) {
    if (--left[k] < 0) out += k + "\n";
  }
  return out;
}

TEST(E2eCompression, BatchesAreOneStreamUnlessTurnedOff) {
  for (const char* compress : {"1", "0"}) {
    SCOPED_TRACE(compress);
    const RunResult run =
        RunProgram({.program = "storm", .env = {{"CUMEMTRACE_COMPRESS", compress}}, .args = kStormArgs});
    ASSERT_EQ(run.exit_code, 0) << run.Describe();
    const std::string bytes = Slurp(run.trace_path);
    const std::vector<FramedPacket> packets = Packets(bytes);
    const auto count = [&](uint32_t field) {
      return std::count_if(packets.begin(), packets.end(), [field](const FramedPacket& p) { return p.field == field; });
    };
    EXPECT_EQ(count(format::field::packet::kEventsZstd), 0) << "format 5's one frame per batch is not written";
    if (std::string(compress) == "1") {
      // A batch whose part would be no smaller stays plain (batch_compression.cc): only one of a few events, which
      // the periodic or the final flush can seal on a slow machine. Every other batch is a part of the stream.
      for (const FramedPacket& p : packets) {
        if (p.field == format::field::packet::kEvents) {
          EXPECT_LT(p.bytes, 1024u) << "a plain batch of many events";
        }
      }
      // Parts are numbered 0, 1, 2, ... within their frame; a new frame starts at 0.
      const std::vector<const FramedPacket*> parts = StreamParts(packets);
      ASSERT_FALSE(parts.empty());
      EXPECT_EQ(StreamPart(bytes, *parts[0]), 0u);
      int frames = 0;
      for (size_t i = 0; i < parts.size(); ++i) {
        const uint32_t part = StreamPart(bytes, *parts[i]);
        if (part == 0) {
          ++frames;
        } else {
          EXPECT_EQ(part, StreamPart(bytes, *parts[i - 1]) + 1) << "part " << i;
        }
      }
      EXPECT_GE(frames, 2) << "several MiB of batches make more than one frame";
    } else {
      EXPECT_EQ(count(format::field::packet::kEventsStream), 0);
      EXPECT_GT(count(format::field::packet::kEvents), 0);
    }
    std::vector<LedgerEntry> ledger;
    ASSERT_TRUE(ReadLedger(run.ledger_path, &ledger).ok());
    const CollectedTrace trace = CollectTrace(run.trace_path);
    ASSERT_TRUE(trace.status.ok()) << trace.status;
    EXPECT_EQ(trace.stats.damaged_packets, 0u);
    EXPECT_EQ(trace.stats.undecodable_batches, 0u);
    EXPECT_EQ(MultisetDifference(LedgerKeys(ledger, true), EventKeys(trace, true)), "");
    EXPECT_EQ(trace.events.size(), ledger.size());
    if (!testing::Test::HasFailure()) RemoveRunDir(run);
  }
}

// A part of a frame whose earlier part is lost cannot be inflated (zstd would give wrong bytes): the reader skips
// the rest of that frame, counts those batches, and reads every later frame whole.
TEST(E2eCompression, ADamagedPartCostsOnlyTheRestOfItsFrame) {
  const RunResult run = RunProgram({.program = "storm", .args = kStormArgs});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::string bytes = Slurp(run.trace_path);
  const std::vector<FramedPacket> packets = Packets(bytes);
  const std::vector<const FramedPacket*> parts = StreamParts(packets);
  // The third part of the first frame, and how many parts follow it in that frame.
  ASSERT_GT(parts.size(), 4u);
  ASSERT_EQ(StreamPart(bytes, *parts[2]), 2u);
  uint64_t rest_of_frame = 0;
  for (size_t i = 3; i < parts.size() && StreamPart(bytes, *parts[i]) != 0; ++i) ++rest_of_frame;
  ASSERT_GT(rest_of_frame, 0u);
  ASSERT_LT(3 + rest_of_frame, parts.size()) << "a later frame follows";
  bytes[parts[2]->start] = '\xff';  // not a packet tag: the framing of that packet is damaged
  const CollectedTrace trace = CollectTrace(WriteDamaged(run, "damaged.pb", bytes));
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  EXPECT_EQ(trace.stats.damaged_packets, 1u);
  EXPECT_EQ(trace.stats.undecodable_batches, rest_of_frame);
  std::vector<LedgerEntry> ledger;
  ASSERT_TRUE(ReadLedger(run.ledger_path, &ledger).ok());
  // What is read is the program's (nothing made up from a frame inflated wrongly), and it lost at most the batches
  // of that one frame: 8192 events each at most.
  EXPECT_EQ(NotIn(LedgerKeys(ledger, true), EventKeys(trace, true)), "");
  EXPECT_LT(trace.events.size(), ledger.size());
  EXPECT_LE(ledger.size() - trace.events.size(), (1 + rest_of_frame) * 8192);
  // The text reports say so.
  std::string err;
  RunAnalyzer({"summary", run.dir + "/damaged.pb"}, &err);
  EXPECT_NE(err.find(std::to_string(rest_of_frame) + " compressed event batches could not be inflated"),
            std::string::npos)
      << err;
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// A bit flipped inside a part's compressed bytes (its framing whole): zstd may inflate it without an error, to
// wrong bytes that every later part of the frame would build on. The part's CRC-32C catches it: the part counts as
// damaged, the rest of its frame is skipped, and nothing made up reaches the report.
TEST(E2eCompression, AFlippedBitInsideAPartIsCaughtByItsChecksum) {
  const RunResult run = RunProgram({.program = "storm", .args = kStormArgs});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::string bytes = Slurp(run.trace_path);
  const std::vector<FramedPacket> packets = Packets(bytes);
  const std::vector<const FramedPacket*> parts = StreamParts(packets);
  ASSERT_GT(parts.size(), 4u);
  std::vector<LedgerEntry> ledger;
  ASSERT_TRUE(ReadLedger(run.ledger_path, &ledger).ok());
  const std::vector<std::string> expected = LedgerKeys(ledger, true);
  // Bits at several places of the second part's payload (past its tags and lengths, before its checksum).
  const FramedPacket& part = *parts[1];
  for (size_t at : {part.bytes / 3, part.bytes / 2, part.bytes * 2 / 3}) {
    SCOPED_TRACE(at);
    std::string damaged = bytes;
    damaged[part.start + at] = static_cast<char>(damaged[part.start + at] ^ 0x10);
    const CollectedTrace trace = CollectTrace(WriteDamaged(run, "flipped.pb", damaged));
    ASSERT_TRUE(trace.status.ok()) << trace.status;
    EXPECT_EQ(trace.stats.damaged_packets, 1u);
    EXPECT_GT(trace.stats.undecodable_batches, 0u) << "the rest of the frame is skipped";
    EXPECT_EQ(NotIn(expected, EventKeys(trace, true)), "");
    EXPECT_LT(trace.events.size(), ledger.size());
  }
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// A child forked (CUMEMTRACE_FOLLOW_FORK=1) while the parent's stream is in the middle of a frame starts its own
// trace with a frame of its own: every part of it inflates, and its events are the child's.
TEST(E2eCompression, AForkedChildStartsItsOwnFrame) {
  const RunResult run = RunProgram({.program = "fork",
                                    .env = {{"CUMEMTRACE_FOLLOW_FORK", "1"}, {"CUMEMTRACE_FLUSH_MS", "20"},
                                            {"E2E_PARENT_PAIRS", "40000"}, {"E2E_CHILD_PAIRS", "40000"},
                                            {"E2E_CHILD_LINGER_MS", "300"}}});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::vector<LedgerEntry> ledger;
  ASSERT_TRUE(ReadLedger(run.ledger_path, &ledger).ok());
  int child = 0;
  for (const LedgerEntry& e : ledger) {
    if (e.pid != run.pid) child = e.pid;
  }
  ASSERT_NE(child, 0);
  for (const int pid : {static_cast<int>(run.pid), child}) {
    SCOPED_TRACE(pid);
    const std::string path = run.dir + "/trace." + std::to_string(pid) + ".pb";
    const std::string bytes = Slurp(path);
    const std::vector<const FramedPacket*> parts = StreamParts(Packets(bytes));
    ASSERT_GT(parts.size(), 2u) << "the churn makes several compressed batches";
    EXPECT_EQ(StreamPart(bytes, *parts[0]), 0u);
    const CollectedTrace trace = CollectTrace(path);
    ASSERT_TRUE(trace.status.ok()) << trace.status;
    EXPECT_EQ(trace.stats.damaged_packets + trace.stats.undecodable_batches, 0u);
    EXPECT_EQ(MultisetDifference(LedgerKeys(EntriesOfPid(ledger, pid), true), EventKeys(trace, true)), "");
  }
  if (!testing::Test::HasFailure()) RemoveRunDir(run);
}

// CUMEMTRACE_TIME_RESOLUTION=10us: every time is the trace's start plus a multiple of 10 us, the events are the
// program's, and the trace is smaller than at 1 ns. A value it does not know is one warning, and 1 ns.
TEST(E2eCompression, TimesAreWrittenAtTheResolutionAsked) {
  const RunResult fine = RunProgram({.program = "storm", .args = kStormArgs});
  const RunResult coarse =
      RunProgram({.program = "storm", .env = {{"CUMEMTRACE_TIME_RESOLUTION", "10us"}}, .args = kStormArgs});
  ASSERT_EQ(fine.exit_code, 0) << fine.Describe();
  ASSERT_EQ(coarse.exit_code, 0) << coarse.Describe();
  const CollectedTrace trace = CollectTrace(coarse.trace_path);
  ASSERT_TRUE(trace.status.ok()) << trace.status;
  std::vector<LedgerEntry> ledger;
  ASSERT_TRUE(ReadLedger(coarse.ledger_path, &ledger).ok());
  EXPECT_EQ(MultisetDifference(LedgerKeys(ledger, true), EventKeys(trace, true)), "");
  uint64_t off_grid = 0;
  for (const analyzer::Event& e : trace.events) off_grid += (e.time_ns - trace.header.start_time_ns) % 10000 != 0;
  EXPECT_EQ(off_grid, 0u);
  const size_t fine_bytes = Slurp(fine.trace_path).size();
  const size_t coarse_bytes = Slurp(coarse.trace_path).size();
  EXPECT_LT(coarse_bytes, fine_bytes);
  RecordProperty("bytes_at_1ns", std::to_string(fine_bytes));
  RecordProperty("bytes_at_10us", std::to_string(coarse_bytes));

  const RunResult bad =
      RunProgram({.program = "storm", .env = {{"CUMEMTRACE_TIME_RESOLUTION", "3us"}}, .args = {"threads", "1", "10"}});
  ASSERT_EQ(bad.exit_code, 0) << bad.Describe();
  EXPECT_NE(Slurp(bad.dir + "/stderr.txt").find("CUMEMTRACE_TIME_RESOLUTION=3us is not one of"), std::string::npos);
  if (!testing::Test::HasFailure()) {
    RemoveRunDir(fine);
    RemoveRunDir(coarse);
    RemoveRunDir(bad);
  }
}

}  // namespace
}  // namespace cumemtrace::e2e
