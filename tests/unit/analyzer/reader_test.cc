// ReadTrace: framing, header checks, exact error messages, truncation, the column rules end to end, metadata and
// ordering by sequence number across batches.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <thread>
#include <string>
#include <vector>

#include <zstd.h>

#include "absl/strings/str_cat.h"
#include "analyzer/reader/trace_reader.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {
namespace {

using format::Api;

class Recorder : public TraceVisitor {
 public:
  void OnHeader(const TraceHeader& h) override {
    header = h;
    log.push_back("header");
  }
  void OnDevice(const DeviceInfo& d) override {
    devices.push_back(d);
    log.push_back("device");
  }
  void OnThread(const ThreadInfo& t) override {
    threads.push_back(t);
    log.push_back("thread");
  }
  void OnModule(const ModuleInfo& m) override {
    modules.push_back(m);
    log.push_back("module");
  }
  void OnStackNode(const StackNode& n) override { nodes.push_back(n); }
  void OnString(uint32_t id, const std::string& v) override { strings.emplace_back(id, v); }
  void OnSymbol(const SymbolInfo& s) override { symbols.push_back(s); }
  void OnEvent(const Event& e) override { events.push_back(e); }
  void OnTrailer(const TrailerInfo& t) override {
    trailer = t;
    log.push_back("trailer");
  }

  TraceHeader header;
  std::vector<DeviceInfo> devices;
  std::vector<ThreadInfo> threads;
  std::vector<ModuleInfo> modules;
  std::vector<StackNode> nodes;
  std::vector<std::pair<uint32_t, std::string>> strings;
  std::vector<SymbolInfo> symbols;
  std::vector<Event> events;
  TrailerInfo trailer;
  std::vector<std::string> log;
};

std::vector<uint64_t> Seqs(const std::vector<Event>& events) {
  std::vector<uint64_t> out;
  for (const Event& e : events) out.push_back(e.seq);
  return out;
}

absl::Status Read(const std::string& path, Recorder* r, ReadStats* stats) { return ReadTrace(path, *r, stats); }

// A damaged packet after the header is not an error of the file: it is skipped, counted, and its reason kept.
// Returns that reason ("<path>: corrupt packet at byte N: what"), or the read's error.
std::string Damage(const std::string& path, Recorder* r, ReadStats* stats) {
  const absl::Status s = ReadTrace(path, *r, stats);
  if (!s.ok()) return "error: " + std::string(s.message());
  if (stats->damaged_packets == 0) return "no damage found";
  return stats->first_damage;
}

// The trace at `bytes` with every plain events packet replaced by its zstd-compressed form (packet events_zstd, as
// the preload writes it when libzstd loads); `damage` flips a byte in the middle of the nth compressed frame (-1:
// none).
std::string CompressEvents(const std::string& bytes, int damage = -1) {
  std::string out;
  int compressed = 0;
  for (size_t i = 0; i < bytes.size();) {
    uint64_t length = 0;
    size_t at = i + 1, shift = 0;
    while (true) {
      const auto c = static_cast<uint8_t>(bytes[at++]);
      length |= static_cast<uint64_t>(c & 0x7f) << shift;
      shift += 7;
      if (c < 0x80) break;
    }
    format::Packet packet;
    const std::string body = bytes.substr(at, length);
    if (!packet.ParseFromString(body) || !packet.has_events()) {
      out += bytes.substr(i, at + length - i);
    } else {
      const std::string batch = packet.events().SerializeAsString();
      std::string frame(ZSTD_compressBound(batch.size()), '\0');
      frame.resize(ZSTD_compress(frame.data(), frame.size(), batch.data(), batch.size(), 1));
      if (compressed++ == damage) frame[frame.size() / 2] ^= 0x5a;
      format::Packet z;
      z.set_events_zstd(frame);
      out += Frame(z);
    }
    i = at + length;
  }
  return out;
}

TEST(ReaderErrors, EmptyFile) {
  const std::string path = WriteTempFile("empty.pb", "");
  Recorder r;
  ReadStats stats;
  absl::Status s = Read(path, &r, &stats);
  EXPECT_EQ(s.message(), path + ": empty file, not a trace");
}

TEST(ReaderErrors, MissingFileAndDirectory) {
  Recorder r;
  ReadStats stats;
  const std::string missing = ::testing::TempDir() + "/does-not-exist.pb";
  EXPECT_EQ(Read(missing, &r, &stats).message(), missing + ": cannot open: No such file or directory");
  EXPECT_EQ(Read(::testing::TempDir(), &r, &stats).message(),
            ::testing::TempDir() + ": is a directory, not a trace file");
}

TEST(ReaderErrors, NotATrace) {
  Recorder r;
  ReadStats stats;
  for (const std::string& content : {std::string("hello, this is text\n"), std::string("\n# comment\n"),
                                     std::string("\x0a\x02\x08\x01", 4), std::string(100, '\0')}) {
    const std::string path = WriteTempFile("text.pb", content);
    EXPECT_EQ(Read(path, &r, &stats).message(), path + ": not a cumemtrace trace (no header)") << content;
  }
}

TEST(ReaderErrors, WrongMagicIsNotATrace) {
  format::Header h = TraceBuilder::DefaultHeader();
  h.set_magic(0x1234);
  const std::string path = TraceBuilder().Header(h).Write("magic.pb");
  Recorder r;
  ReadStats stats;
  EXPECT_EQ(Read(path, &r, &stats).message(), path + ": not a cumemtrace trace (no header)");
}

TEST(ReaderErrors, FirstPacketNotAHeader) {
  const std::string path = TraceBuilder().Thread(1, 100, "main").Header().Write("noheader.pb");
  Recorder r;
  ReadStats stats;
  EXPECT_EQ(Read(path, &r, &stats).message(), path + ": not a cumemtrace trace (no header)");
}

TEST(ReaderErrors, HeaderCutOff) {
  const std::string bytes = TraceBuilder().Header().bytes();
  const std::string path = WriteTempFile("cut_header.pb", bytes.substr(0, bytes.size() - 3));
  Recorder r;
  ReadStats stats;
  EXPECT_EQ(Read(path, &r, &stats).message(),
            path + ": cut off inside its header: the traced process wrote no whole packet");
}

TEST(ReaderErrors, NewerVersion) {
  format::Header h = TraceBuilder::DefaultHeader();
  h.set_format_version(format::kFormatVersion + 1);
  const std::string path = TraceBuilder().Header(h).Write("newer.pb");
  Recorder r;
  ReadStats stats;
  EXPECT_EQ(Read(path, &r, &stats).message(),
            absl::StrCat(path, ": trace format version ", format::kFormatVersion + 1,
                         " is newer than this cumem-analyze reads (up to ", format::kFormatVersion,
                         "); upgrade cumem-analyze"));
}

TEST(ReaderErrors, BadTag) {
  TraceBuilder b;
  b.Header().Thread(1, 100, "main");
  const size_t offset = b.size();
  b.Raw("\x12\x00").Thread(2, 101, "x");
  const std::string path = b.Write("badtag.pb");
  Recorder r;
  ReadStats stats;
  EXPECT_EQ(Damage(path, &r, &stats),
            path + ": corrupt packet at byte " + std::to_string(offset) +
                ": expected a packet tag (0x0a), found 0x12");
  EXPECT_EQ(stats.damaged_packets, 1u);
  EXPECT_EQ(stats.skipped_bytes, 1u);
  EXPECT_EQ(r.threads.size(), 2u) << "the packet after the damage is read";
}

// Compressed event batches (format 5) read as the plain ones they hold: the same events, in the same order.
TEST(ReaderCompressed, BatchesReadAsThePlainOnes) {
  std::vector<Ev> events;
  for (uint64_t i = 1; i <= 3000; ++i) events.push_back(Alloc(i, i * 0.01, 0x1000 * (i % 97), 512 * (i % 13)));
  TraceBuilder b;
  b.Header().Thread(1, 100, "main");
  for (size_t i = 0; i < events.size(); i += 1000) {
    b.Events(std::vector<Ev>(events.begin() + i, events.begin() + i + 1000));
  }
  const std::string plain = b.Write("plain.pb");
  const std::string packed = WriteTempFile("packed.pb", CompressEvents(b.bytes()));
  Recorder p, z;
  ReadStats ps, zs;
  ASSERT_TRUE(Read(plain, &p, &ps).ok());
  ASSERT_TRUE(Read(packed, &z, &zs).ok());
  ASSERT_EQ(z.events.size(), 3000u);
  ASSERT_EQ(p.events.size(), z.events.size());
  for (size_t i = 0; i < p.events.size(); ++i) {
    EXPECT_EQ(z.events[i].seq, p.events[i].seq);
    EXPECT_EQ(z.events[i].time_ns, p.events[i].time_ns);
    EXPECT_EQ(z.events[i].address, p.events[i].address);
    EXPECT_EQ(z.events[i].size, p.events[i].size);
    EXPECT_EQ(z.events[i].api, p.events[i].api);
  }
  EXPECT_EQ(zs.damaged_packets, 0u);
}

// A damaged compressed batch costs that batch only, with a reason; the batches around it are read.
TEST(ReaderCompressed, ADamagedFrameCostsItsBatch) {
  TraceBuilder b;
  b.Header();
  for (uint64_t k = 0; k < 3; ++k) {
    std::vector<Ev> batch;
    for (uint64_t i = 1; i <= 500; ++i) batch.push_back(Alloc(k * 500 + i, 1, 0x1000 * i, 4096));
    b.Events(batch);
  }
  const std::string path = WriteTempFile("zdamaged.pb", CompressEvents(b.bytes(), 1));
  Recorder r;
  ReadStats stats;
  const std::string why = Damage(path, &r, &stats);
  EXPECT_NE(why.find("compressed event batch"), std::string::npos) << why;
  EXPECT_EQ(stats.damaged_packets, 1u);
  EXPECT_EQ(r.events.size(), 1000u);
}

// A frame that says it holds more than any batch could is not inflated (no allocation of its claimed size).
TEST(ReaderCompressed, AnImplausibleSizeIsRefused) {
  std::string big(1 << 20, 'x');
  std::string frame(ZSTD_compressBound(big.size()), '\0');
  frame.resize(ZSTD_compress(frame.data(), frame.size(), big.data(), big.size(), 1));
  // The frame header: magic (4 bytes), descriptor (0x80: a 4-byte content size, a window byte), window, then the
  // content size, little-endian: make it 2 GiB.
  ASSERT_EQ(static_cast<uint8_t>(frame[4]), 0x80);
  format::Packet z;
  std::string forged = frame;
  forged[6] = static_cast<char>(0xff);
  forged[7] = static_cast<char>(0xff);
  forged[8] = static_cast<char>(0xff);
  forged[9] = static_cast<char>(0x7f);
  z.set_events_zstd(forged);
  TraceBuilder b;
  b.Header().Packet(z).Events({Alloc(1, 1, 0x1000, 8)});
  const std::string path = b.Write("zhuge.pb");
  Recorder r;
  ReadStats stats;
  const std::string why = Damage(path, &r, &stats);
  EXPECT_NE(why.find("compressed event batch says it holds"), std::string::npos) << why;
  EXPECT_EQ(r.events.size(), 1u);
}

// One byte inserted inside a packet (its length now ends one byte early): that packet is lost, the next is read.
TEST(ReaderDamage, InsertedByteCostsOnePacket) {
  TraceBuilder b;
  b.Header().Events({Alloc(1, 1, 0x1000, 100)});
  const size_t start = b.size();
  b.Thread(1, 100, "main-thread-name");
  const size_t end = b.size();
  b.Events({Alloc(2, 2, 0x2000, 200)});
  std::string bytes = b.bytes();
  bytes.insert(start + (end - start) / 2, 1, '\x55');
  const std::string path = WriteTempFile("inserted.pb", bytes);
  Recorder r;
  ReadStats stats;
  ASSERT_TRUE(Read(path, &r, &stats).ok());
  EXPECT_EQ(stats.damaged_packets, 1u);
  EXPECT_GT(stats.skipped_bytes, 0u);
  EXPECT_EQ(r.events.size(), 2u);
}

TEST(ReaderErrors, PacketThatDoesNotParse) {
  TraceBuilder b;
  b.Header();
  const size_t offset = b.size();
  // A packet whose body is field 2 (thread) with a length that runs past the packet's own end.
  b.Raw(std::string("\x0a\x03\x12\x7f\x01", 5)).Thread(1, 1, "a");
  const std::string path = b.Write("noparse.pb");
  Recorder r;
  ReadStats stats;
  EXPECT_EQ(Damage(path, &r, &stats),
            path + ": corrupt packet at byte " + std::to_string(offset) + ": the packet does not parse");
}

TEST(ReaderErrors, EventBatchThatDoesNotParse) {
  TraceBuilder b;
  b.Header();
  const size_t offset = b.size();
  b.Raw(std::string("\x0a\x04\x2a\x02\x22\x05", 6)).Thread(1, 1, "a");  // packed time deltas cut short
  const std::string path = b.Write("nobatch.pb");
  Recorder r;
  ReadStats stats;
  EXPECT_EQ(Damage(path, &r, &stats),
            path + ": corrupt packet at byte " + std::to_string(offset) + ": the event batch does not parse");
}

TEST(ReaderErrors, LengthVarintOverflows) {
  TraceBuilder b;
  b.Header();
  const size_t offset = b.size();
  b.Raw("\x0a" + std::string(10, '\xff') + "\x01" + std::string(32, 'x'));
  const std::string path = b.Write("varint.pb");
  Recorder r;
  ReadStats stats;
  EXPECT_EQ(Damage(path, &r, &stats), path + ": corrupt packet at byte " + std::to_string(offset) +
                                                  ": the packet length is not a valid varint");
}

TEST(ReaderErrors, ColumnCountMismatchNamesTheColumn) {
  struct Case {
    std::function<void(format::EventBatch&)> damage;
    std::string message;
  };
  const std::vector<Ev> events = {Alloc(1, 1, 0x1000, 10, 5), Alloc(2, 2, 0x2000, 20, 6), Free(3, 3, 0x1000)};
  const std::vector<Case> cases = {
      {[](format::EventBatch& b) { b.add_time_delta_ns(1); },
       "event batch column time_delta_ns has 4 entries for 3 rows"},
      {[](format::EventBatch& b) { b.mutable_address_delta()->RemoveLast(); },
       "event batch column address_delta has 2 entries for 3 rows"},
      {[](format::EventBatch& b) { b.mutable_size()->RemoveLast(); },
       "event batch column size has 1 entries for 2 allocating rows"},
      {[](format::EventBatch& b) { b.add_stream(7); }, "event batch column stream has 1 entries for 0 rows with a stream"},
      {[](format::EventBatch& b) { b.add_aux(7); }, "event batch column aux has 1 entries for 0 rows with an aux value"},
      {[](format::EventBatch& b) { b.add_stack(1); },
       "event batch column stack has 4 entries for 3 rows with a stack"},
      {[](format::EventBatch& b) { b.clear_thread(); },
       "event batch column thread has 0 entries for 3 rows (want one per row, or exactly one)"},
      {[](format::EventBatch& b) { b.add_device(0); },
       "event batch column device has 4 entries for 3 rows (want one per row, or exactly one)"},
      {[](format::EventBatch& b) { b.add_seq_delta(1); },
       "event batch column seq_delta has 1 entries for 3 rows (want one per row, or none)"},
      {[](format::EventBatch& b) { b.add_failures()->set_row(3); },
       "event batch column failures names row 3 of a batch of 3 rows"},
  };
  for (const Case& c : cases) {
    format::EventBatch batch = TraceBuilder::Encode(events, {.per_row_columns = true});
    c.damage(batch);
    TraceBuilder b;
    b.Header();
    const size_t offset = b.size();
    b.Batch(batch);
    const std::string path = b.Write("columns.pb");
    Recorder r;
    ReadStats stats;
    EXPECT_EQ(Damage(path, &r, &stats),
              path + ": corrupt packet at byte " + std::to_string(offset) + ": " + c.message);
  }
}

TEST(ReaderErrors, SymbolAndStackColumnMismatch) {
  {
    TraceBuilder b;
    b.Header();
    const size_t offset = b.size();
    b.Symbols({1, 2}, {1}, {1, 1}, {0, 0});
    const std::string path = b.Write("symbols.pb");
    Recorder r;
    ReadStats stats;
    EXPECT_EQ(Damage(path, &r, &stats), path + ": corrupt packet at byte " + std::to_string(offset) +
                                                    ": symbols: column function has 1 entries for 2 pcs");
  }
  {
    TraceBuilder b;
    b.Header();
    const size_t offset = b.size();
    b.StackNodes(1, {0, 1}, {0x10});
    const std::string path = b.Write("nodes.pb");
    Recorder r;
    ReadStats stats;
    EXPECT_EQ(Damage(path, &r, &stats), path + ": corrupt packet at byte " + std::to_string(offset) +
                                                    ": stack nodes: column parent has 2 entries, column pc has 1");
  }
}

TEST(ReaderTruncation, CutAnywhereInTheLastPacket) {
  TraceBuilder b;
  b.Header().Thread(1, 100, "main").Events({Alloc(1, 1, 0x1000, 100), Alloc(2, 2, 0x2000, 200)});
  const size_t last = b.size();
  b.Events({Free(3, 3, 0x1000), Alloc(4, 4, 0x3000, 300)});
  const std::string full = b.bytes();
  for (size_t cut = last + 1; cut < full.size(); ++cut) {
    const std::string path = WriteTempFile("cut.pb", full.substr(0, cut));
    Recorder r;
    ReadStats stats;
    ASSERT_TRUE(Read(path, &r, &stats).ok()) << cut;
    EXPECT_TRUE(stats.truncated) << cut;
    EXPECT_EQ(stats.truncated_at, last) << cut;
    EXPECT_EQ(stats.events, 2u);
    EXPECT_EQ(Seqs(r.events), (std::vector<uint64_t>{1, 2}));
    EXPECT_FALSE(stats.has_trailer);
    EXPECT_EQ(stats.bytes, cut);
  }
  // Cut exactly at a packet boundary: nothing is cut off.
  const std::string path = WriteTempFile("cut.pb", full.substr(0, last));
  Recorder r;
  ReadStats stats;
  ASSERT_TRUE(Read(path, &r, &stats).ok());
  EXPECT_FALSE(stats.truncated);
  EXPECT_EQ(stats.events, 2u);
}

TEST(ReaderTruncation, ZeroFilledTailIsACutOff) {
  TraceBuilder b;
  b.Header().Events({Alloc(1, 1, 0x1000, 100)});
  const size_t end = b.size();
  b.Raw(std::string(4096, '\0'));
  const std::string path = b.Write("zeros.pb");
  Recorder r;
  ReadStats stats;
  ASSERT_TRUE(Read(path, &r, &stats).ok());
  EXPECT_TRUE(stats.truncated);
  EXPECT_EQ(stats.truncated_at, end);
  EXPECT_EQ(stats.events, 1u);
}

TEST(ReaderTruncation, HugeLengthIsACutOffNotAnAllocation) {
  TraceBuilder b;
  b.Header().Events({Alloc(1, 1, 0x1000, 100)});
  const size_t end = b.size();
  b.Raw("\x0a" + Varint(uint64_t{1} << 62) + "abc");
  const std::string path = b.Write("huge.pb");
  Recorder r;
  ReadStats stats;
  ASSERT_TRUE(Read(path, &r, &stats).ok());
  EXPECT_TRUE(stats.truncated);
  EXPECT_EQ(stats.truncated_at, end);
}

TEST(ReaderColumns, DeltasConstantsAndPerApiColumns) {
  Ev a = Alloc(10, 1.0, 0xffff'ffff'ffff'f000ull, 4096, 3, Api::kCudaMallocAsync, 1, 2);
  a.stream = 0xabc;
  Ev m = Alloc(11, 0.5, 0x1000, 1 << 20, 4, Api::kCuMemMap, 1, 2);  // time goes backwards, address wraps
  m.aux = 0x77;
  Ev f = Free(12, 2.0, 0xffff'ffff'ffff'f000ull, Api::kCudaFreeAsync, 1, 2);
  f.stream = 0xdef;
  f.stack = 9;
  Ev fail = Alloc(13, 3.0, 0, uint64_t{1} << 50, 5, Api::kCuMemAlloc, 1, 3);
  fail.result = 2;
  fail.has_mem_info = true;
  fail.free_bytes = 1000;
  fail.total_bytes = 5000;
  for (bool per_row : {false, true}) {
    const std::string path = TraceBuilder()
                                 .Header()
                                 .Events({a, m, f, fail}, {.per_row_columns = per_row, .explicit_seq = per_row})
                                 .Write("columns_ok.pb");
    Recorder r;
    ReadStats stats;
    ASSERT_TRUE(Read(path, &r, &stats).ok());
    ASSERT_EQ(r.events.size(), 4u);
    const Event& e0 = r.events[0];
    EXPECT_EQ(e0.seq, 10u);
    EXPECT_EQ(e0.time_ns, kStartNs + 1'000'000);
    EXPECT_EQ(e0.api, Api::kCudaMallocAsync);
    EXPECT_EQ(e0.info->kind, format::Kind::kPool);
    EXPECT_EQ(e0.device, 1);
    EXPECT_EQ(e0.address, 0xffff'ffff'ffff'f000ull);
    EXPECT_EQ(e0.size, 4096u);
    EXPECT_EQ(e0.stream, 0xabcu);
    EXPECT_EQ(e0.stack, 3u);
    EXPECT_EQ(e0.thread, 2u);
    EXPECT_EQ(e0.result, 0);
    const Event& e1 = r.events[1];
    EXPECT_EQ(e1.time_ns, kStartNs + 500'000);
    EXPECT_EQ(e1.address, 0x1000u);
    EXPECT_EQ(e1.size, uint64_t{1} << 20);
    EXPECT_EQ(e1.aux, 0x77u);
    EXPECT_EQ(e1.stream, 0u);
    const Event& e2 = r.events[2];
    EXPECT_EQ(e2.api, Api::kCudaFreeAsync);
    EXPECT_EQ(e2.size, 0u);
    EXPECT_EQ(e2.stream, 0xdefu);
    EXPECT_EQ(e2.stack, 9u);
    const Event& e3 = r.events[3];
    EXPECT_EQ(e3.thread, 3u);
    EXPECT_EQ(e3.result, 2);
    EXPECT_TRUE(e3.has_mem_info);
    EXPECT_EQ(e3.free_bytes, 1000u);
    EXPECT_EQ(e3.total_bytes, 5000u);
    EXPECT_EQ(e3.size, uint64_t{1} << 50);
  }
}

TEST(ReaderColumns, UnknownApisAreSkippedAndCounted) {
  format::EventBatch batch = TraceBuilder::Encode({Alloc(1, 1, 0x1000, 10), Alloc(2, 2, 0x2000, 20)});
  // Insert an unknown api (99) as row 1: its time and address deltas still count.
  batch.clear_api();
  batch.add_api(40);
  batch.add_api(99);
  batch.add_api(40);
  batch.clear_time_delta_ns();
  batch.add_time_delta_ns(0);
  batch.add_time_delta_ns(500);
  batch.add_time_delta_ns(500);
  batch.clear_address_delta();
  batch.add_address_delta(0x1000);
  batch.add_address_delta(0x10);
  batch.add_address_delta(0x10);
  const std::string path = TraceBuilder().Header().Batch(batch).Write("unknown.pb");
  Recorder r;
  ReadStats stats;
  ASSERT_TRUE(Read(path, &r, &stats).ok());
  EXPECT_EQ(stats.unknown_api_events, 1u);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].seq, 1u);
  EXPECT_EQ(r.events[1].seq, 3u);
  EXPECT_EQ(r.events[1].time_ns, r.events[0].time_ns + 1000);
  EXPECT_EQ(r.events[1].address, 0x1020u);
  EXPECT_EQ(r.events[1].size, 20u);
}

TEST(ReaderOrdering, OutOfOrderAcrossBatches) {
  // Thread A took seq 3 but wrote it after thread B wrote 4 and 5, in a later batch; 7 arrives before 6.
  const std::string path = TraceBuilder()
                               .Header()
                               .Events({Alloc(1, 1, 0x1000, 1), Alloc(2, 2, 0x2000, 1), Alloc(4, 4, 0x4000, 1),
                                        Alloc(5, 5, 0x5000, 1)})
                               .Events({Alloc(3, 3, 0x3000, 1), Alloc(7, 7, 0x7000, 1), Alloc(6, 6, 0x6000, 1)})
                               .Events({Alloc(8, 8, 0x8000, 1)})
                               .Write("order.pb");
  Recorder r;
  ReadStats stats;
  ASSERT_TRUE(Read(path, &r, &stats).ok());
  EXPECT_EQ(Seqs(r.events), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(r.events[2].address, 0x3000u);
  EXPECT_EQ(stats.events, 8u);
}

TEST(ReaderOrdering, LateEventBeyondTheWindow) {
  // 70000 events in order, then one with seq 0: it arrives after the window let 65536-or-more-older events go.
  std::vector<Ev> events;
  for (uint64_t i = 1; i <= 70000; ++i) events.push_back(Alloc(i, 1, 0x1000 * i, 8));
  const std::string path =
      TraceBuilder().Header().Events(events).Events({Alloc(0, 0, 0x10, 8)}).Write("late.pb");
  Recorder r;
  ReadStats stats;
  ASSERT_TRUE(Read(path, &r, &stats).ok());
  ASSERT_EQ(r.events.size(), 70001u);
  // The first 70000 - 65536 = 4464 events left the window before seq 0 arrived; it comes right after them.
  EXPECT_EQ(r.events[4463].seq, 4464u);
  EXPECT_EQ(r.events[4464].seq, 0u);
  EXPECT_EQ(r.events[4465].seq, 4465u);
  EXPECT_EQ(r.events.back().seq, 70000u);
}

TEST(ReaderMetadata, EverythingArrivesInFileOrder) {
  format::Packet future;  // a packet kind this version does not know: no oneof set
  const std::string path = TraceBuilder()
                               .Header()
                               .Device(0, "NVIDIA H200", 150'000'000'000)
                               .Device(-1, "host", 0)
                               .Thread(1, 100, "python")
                               .Module(1, "/usr/lib/libcuda.so.1", 0x7000'0000, 0x7000'1000, 0x7000'9000)
                               .StackNodes(1, {0, 1}, {0x7000'1234, 0x7000'5678})
                               .Strings(1, {"cuMemAlloc", "_Z3foov"})
                               .Symbols({0x7000'1234}, {1}, {1}, {0x34})
                               .Packet(future)
                               .Header()  // a second header is ignored
                               .Thread(1, 100, "renamed")
                               .Events({Alloc(1, 1, 0x1000, 10, 2)})
                               .Trailer(1, kStartNs + 5'000'000)
                               .Write("meta.pb");
  Recorder r;
  ReadStats stats;
  ASSERT_TRUE(Read(path, &r, &stats).ok());
  EXPECT_EQ(r.log, (std::vector<std::string>{"header", "device", "device", "thread", "module", "thread",
                                              "trailer"}));
  EXPECT_EQ(r.header.pid, 4242);
  EXPECT_EQ(r.header.argv, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(r.header.start_time_ns, kStartNs);
  EXPECT_EQ(r.header.executable, "/usr/bin/python3");
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.devices[0].name, "NVIDIA H200");
  EXPECT_EQ(r.devices[0].total_memory, 150'000'000'000u);
  EXPECT_EQ(r.devices[1].ordinal, -1);
  EXPECT_EQ(r.threads[1].name, "renamed");
  EXPECT_EQ(r.modules[0].path, "/usr/lib/libcuda.so.1");
  EXPECT_EQ(r.modules[0].load_bias, 0x7000'0000u);
  ASSERT_EQ(r.nodes.size(), 2u);
  EXPECT_EQ(r.nodes[1].id, 2u);
  EXPECT_EQ(r.nodes[1].parent, 1u);
  EXPECT_EQ(r.nodes[1].pc, 0x7000'5678u);
  ASSERT_EQ(r.strings.size(), 2u);
  EXPECT_EQ(r.strings[1], std::make_pair(2u, std::string("_Z3foov")));
  ASSERT_EQ(r.symbols.size(), 1u);
  EXPECT_EQ(r.symbols[0].offset, 0x34u);
  EXPECT_EQ(r.trailer.events, 1u);
  EXPECT_EQ(r.trailer.end_time_ns, kStartNs + 5'000'000);
  EXPECT_EQ(r.trailer.recorder_time_ns, 12345u);
  EXPECT_EQ(r.trailer.recorder_python_ns, 2001u);
  EXPECT_EQ(r.trailer.recorder_unwind_ns, 2002u);
  EXPECT_EQ(r.trailer.recorder_lock_wait_ns, 2003u);
  EXPECT_EQ(r.trailer.recorder_stack_ns, 2004u);
  EXPECT_EQ(r.trailer.writer_time_ns, 2005u);
  EXPECT_EQ(r.trailer.stalled_seals, 2006u);
  EXPECT_EQ(r.trailer.clock_calibrations, 2007u);
  EXPECT_EQ(r.trailer.clock_max_error_ns, 2008u);
  EXPECT_EQ(r.trailer.clock_steps, 2009u);
  EXPECT_EQ(r.trailer.recorder_prologue_ns, 2010u);
  EXPECT_EQ(r.trailer.recorder_append_ns, 2011u);
  EXPECT_TRUE(stats.has_trailer);
  EXPECT_FALSE(stats.truncated);
  EXPECT_EQ(stats.packets, 13u);
  EXPECT_EQ(r.events.size(), 1u);
}

TEST(ReaderMetadata, TextThatIsNotUtf8ReadsIntact) {
  // A thread name the kernel cut to 15 bytes inside a UTF-8 character, a Latin-1 argument, a bad symbol name: the
  // schema makes them bytes, so they arrive exactly as the process wrote them (renderers escape them).
  format::Header h = TraceBuilder::DefaultHeader();
  h.add_argv("caf\xe9.py");
  const std::string path = TraceBuilder()
                               .Header(h)
                               .Thread(1, 100, "data_loader_\xe2\x82")
                               .Strings(1, {"ok", "_Z3f\xffv"})
                               .Events({Alloc(1, 1, 0x1000, 10)})
                               .Write("utf8.pb");
  Recorder r;
  ReadStats stats;
  ASSERT_TRUE(Read(path, &r, &stats).ok());
  EXPECT_EQ(r.header.argv.back(), "caf\xe9.py");
  ASSERT_EQ(r.threads.size(), 1u);
  EXPECT_EQ(r.threads[0].name, "data_loader_\xe2\x82");
  EXPECT_EQ(r.strings[1].second, "_Z3f\xffv");
  EXPECT_EQ(r.events.size(), 1u);
}

TEST(ReaderPipe, ReadsFromAPipeToItsEnd) {
  // `cumem-analyze <(zcat run.pb.gz)`: no file size to check lengths against; the end shows when reading hits it.
  std::vector<Ev> events;
  for (uint64_t i = 1; i <= 100000; ++i) events.push_back(Alloc(i, 1, 0x1000 * i, 8));
  TraceBuilder b;
  b.Header().Events(events).Events({Free(100001, 2, 0x1000)});
  const std::string bytes = b.bytes() + "\x0a\x05" "ab";  // and a cut-off packet at the end
  const std::string path = ::testing::TempDir() + "/pipe.pb";
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  std::thread writer([&] {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  });
  Recorder r;
  ReadStats stats;
  const absl::Status s = Read(path, &r, &stats);
  writer.join();
  ::unlink(path.c_str());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(r.events.size(), 100001u);
  EXPECT_TRUE(stats.truncated);
  EXPECT_EQ(stats.truncated_at, b.size());
}

TEST(ReaderLarge, PacketsLargerThanTheBuffer) {
  // One batch of 600k events (a packet of several MiB, larger than the read chunk) between small packets.
  std::vector<Ev> events;
  for (uint64_t i = 1; i <= 600000; ++i) events.push_back(Alloc(i, i * 0.001, 0x1000 * i, i, i % 7, Api::kCudaMalloc, 0, i % 3));
  TraceBuilder b;
  b.Header().Thread(0, 1, "a").Events(events).Thread(1, 2, "b").Events({Free(600001, 700, 0x1000)});
  ASSERT_GT(b.size(), size_t{4} << 20);
  const std::string path = b.Write("large.pb");
  Recorder r;
  ReadStats stats;
  ASSERT_TRUE(Read(path, &r, &stats).ok());
  ASSERT_EQ(r.events.size(), 600001u);
  EXPECT_EQ(r.events[599999].size, 600000u);
  EXPECT_EQ(r.events[599999].thread, 0u);
  EXPECT_EQ(r.events[599998].thread, 2u);
  EXPECT_EQ(r.events[600000].api, Api::kCudaFree);
  EXPECT_EQ(r.threads.size(), 2u);
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
