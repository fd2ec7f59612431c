// The Phase packet (NVTX ranges, preload/nvtx_injection.cc) as the preload's encoder writes it must parse with
// protoc's classes into exactly the intended message; and the pending buffer keeps only ranges still open.
#include <string>

#include "gtest/gtest.h"
#include "preload/byte_buffer.h"
#include "preload/phase_pending.h"
#include "preload/trace_writer.h"
#include "proto/format.h"
#include "proto/trace.pb.h"

namespace cumemtrace::preload {
namespace {

using format::PhaseKind;

static_assert(static_cast<int>(PhaseKind::kPush) == cumemtrace::format::Phase::PUSH);
static_assert(static_cast<int>(PhaseKind::kPop) == cumemtrace::format::Phase::POP);
static_assert(static_cast<int>(PhaseKind::kStart) == cumemtrace::format::Phase::START);
static_assert(static_cast<int>(PhaseKind::kEnd) == cumemtrace::format::Phase::END);
static_assert(static_cast<int>(PhaseKind::kMark) == cumemtrace::format::Phase::MARK);
static_assert(format::field::packet::kPhase == cumemtrace::format::Packet::kPhaseFieldNumber);

TEST(PhaseConformance, EveryFieldRoundTrips) {
  ByteBuffer buffer;
  ASSERT_TRUE(buffer.Init(1 << 16));
  const std::string name("train \xc3\xa9poch\0x", 14);  // bytes, not a C string: a NUL inside survives
  PhaseRecord r{~0ull, -3, 7, static_cast<uint32_t>(PhaseKind::kStart), name.data(), name.size(), 1ull << 40, 5};
  ASSERT_TRUE(WritePhase(&buffer, r));
  PhaseRecord pop{0, 10, 1, static_cast<uint32_t>(PhaseKind::kPop), nullptr, 0, 0, 0};
  ASSERT_TRUE(WritePhase(&buffer, pop));
  cumemtrace::format::Trace trace;
  ASSERT_TRUE(trace.ParseFromArray(buffer.data(), static_cast<int>(buffer.size())));
  ASSERT_EQ(trace.packet_size(), 2);
  ASSERT_TRUE(trace.packet(0).has_phase());
  const auto& p = trace.packet(0).phase();
  EXPECT_EQ(p.after_seq(), ~0ull);
  EXPECT_EQ(p.time_ns(), -3);
  EXPECT_EQ(p.thread(), 7u);
  EXPECT_EQ(p.kind(), cumemtrace::format::Phase::START);
  EXPECT_EQ(p.name(), name);
  EXPECT_EQ(p.range_id(), 1ull << 40);
  EXPECT_EQ(p.domain(), 5u);
  const auto& q = trace.packet(1).phase();
  EXPECT_EQ(q.kind(), cumemtrace::format::Phase::POP);
  EXPECT_EQ(q.after_seq(), 0u);
  EXPECT_EQ(q.thread(), 1u);
  EXPECT_TRUE(q.name().empty());
}

TEST(PendingPhases, KeepsOnlyWhatIsStillOpen) {
  static PendingPhases pending;
  const auto push = static_cast<uint32_t>(PhaseKind::kPush);
  const auto pop = static_cast<uint32_t>(PhaseKind::kPop);
  pending.Note(push, 1, 100, "main", "train", 5, 0, 0, 1);
  pending.Note(push, 1, 100, "main", "step", 4, 0, 0, 2);
  pending.Note(push, 2, 101, "loader", "load", 4, 0, 0, 3);
  pending.Note(static_cast<uint32_t>(PhaseKind::kStart), 2, 101, "loader", "epoch", 5, 9, 0, 4);
  pending.Note(static_cast<uint32_t>(PhaseKind::kMark), 1, 100, "main", "m", 1, 0, 0, 5);
  pending.Note(pop, 1, 100, "main", nullptr, 0, 0, 0, 6);  // closes "step", not "load" (another thread)
  pending.Note(static_cast<uint32_t>(PhaseKind::kEnd), 1, 100, "main", nullptr, 0, 9, 0, 7);  // "epoch"
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(std::string(pending.at(0).name, pending.at(0).name_size), "train");
  EXPECT_EQ(std::string(pending.at(1).name, pending.at(1).name_size), "load");
  EXPECT_STREQ(pending.at(1).thread_name, "loader");
  const std::string long_name(500, 'x');
  pending.Note(push, 3, 102, "", long_name.data(), long_name.size(), 0, 0, 8);
  EXPECT_EQ(pending.at(2).name_size, kPendingNameBytes);
  for (size_t i = 0; i < kPendingPhases; ++i) pending.Note(push, 4, 103, "", "n", 1, 0, 0, 9);
  EXPECT_EQ(pending.size(), kPendingPhases);
  EXPECT_EQ(pending.dropped(), 3u);
}

}  // namespace
}  // namespace cumemtrace::preload
