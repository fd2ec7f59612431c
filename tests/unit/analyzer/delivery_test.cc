// The reader's second thread (reader/delivery.h), alone and with batches decoded on threads of their own
// (reader/batch_decoders.h): a visitor called from it sees the same metadata and events, in the same order, as one
// called on the reader's thread, and the same ReadStats come back; also when the trace is
// damaged or cut off. Events are logged one by one: the chunks they come in may differ, and visitors must not rely
// on them.
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analyzer/reader/reorder_window.h"
#include "analyzer/reader/trace_reader.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {
namespace {

using format::Api;

// Every call, as one line.
class CallLog : public TraceVisitor {
 public:
  void OnHeader(const TraceHeader& h) override { Add("header ", h.pid, " ", h.format_version); }
  void OnDevice(const DeviceInfo& d) override { Add("device ", d.ordinal, " ", d.name, " ", d.total_memory); }
  void OnThread(const ThreadInfo& t) override { Add("thread ", t.index, " ", t.tid, " ", t.name); }
  void OnModule(const ModuleInfo& m) override { Add("module ", m.id, " ", m.path); }
  void OnStackNode(const StackNode& n) override { Add("node ", n.id, " ", n.parent, " ", n.pc); }
  void OnString(uint32_t id, const std::string& v) override { Add("string ", id, " ", v); }
  void OnSymbol(const SymbolInfo& s) override { Add("symbol ", s.pc, " ", s.function); }
  void OnPythonFrame(const PythonFrameInfo& f) override { Add("python ", f.id, " ", f.line); }
  void OnMemorySample(const MemorySample& s) override { Add("sample ", s.device, " ", s.free_bytes, " ", s.after_seq); }
  void OnNotice(const NoticeInfo& n) override { Add("notice ", n.message); }
  void OnAllocatorAttach(const AllocatorAttachInfo& a) override { Add("attach ", a.after_seq, " ", a.config); }
  void OnPhase(const PhaseInfo& p) override { Add("phase ", p.after_seq, " ", p.name); }
  void OnGpuProcesses(const GpuProcessesInfo& g) override { Add("processes ", g.device, " ", g.processes.size()); }
  void OnEvent(const Event& e) override {
    Add("event ", e.seq, " ", e.time_ns, " ", static_cast<int>(e.api), " ", e.device, " ", e.address, " ", e.size,
        " ", e.stack, " ", e.thread, " ", e.result);
  }
  void OnTrailer(const TrailerInfo& t) override { Add("trailer ", t.events); }
  void OnReadProgress(uint64_t bytes_read, uint64_t file_bytes) override {
    Add("progress ", bytes_read, " ", file_bytes);
  }

  std::vector<std::string> lines;

 private:
  template <typename... T>
  void Add(const T&... parts) {
    lines.push_back(absl::StrCat(parts...));
  }
};

struct Read {
  absl::Status status;
  ReadStats stats;
  std::vector<std::string> lines;
};

Read ReadWith(const std::string& path, DeliveryThread thread) {
  CallLog log;
  Read r;
  r.status = ReadTrace(path, log, &r.stats, thread);
  r.lines = std::move(log.lines);
  return r;
}

// Returns the read on the reader's thread; compares it with the second thread's, with and without batches decoded
// apart (batch_decoders.h).
Read ExpectSameOnBothThreads(const std::string& path) {
  const Read same = ReadWith(path, DeliveryThread::kSame);
  for (DeliveryThread thread : {DeliveryThread::kSecond, DeliveryThread::kDecodersToo}) {
    const Read second = ReadWith(path, thread);
    const char* how = thread == DeliveryThread::kSecond ? "second thread" : "decoders too";
    EXPECT_EQ(same.status, second.status) << path << " " << how;
    EXPECT_EQ(same.lines, second.lines) << path << " " << how;
    EXPECT_EQ(same.stats.events, second.stats.events) << how;
    EXPECT_EQ(same.stats.packets, second.stats.packets) << how;
    EXPECT_EQ(same.stats.late_events, second.stats.late_events) << how;
    EXPECT_EQ(same.stats.unknown_api_events, second.stats.unknown_api_events) << how;
    EXPECT_EQ(same.stats.damaged_packets, second.stats.damaged_packets) << how;
    EXPECT_EQ(same.stats.first_damage_at, second.stats.first_damage_at) << how;
    EXPECT_EQ(same.stats.truncated, second.stats.truncated) << how;
    EXPECT_EQ(same.stats.truncated_at, second.stats.truncated_at) << how;
    EXPECT_EQ(same.stats.time_unit_ns, second.stats.time_unit_ns) << how;
  }
  return same;
}

// A trace long enough to fill several of the second thread's chunks, with metadata between every batch (threads
// renamed, strings, stack nodes, samples, phases) and events that arrive after larger-numbered ones; `garbage`
// puts bytes that are no packet before the seventh batch.
TraceBuilder LongTrace(bool garbage = false) {
  TraceBuilder b;
  b.Header().Device(0, "H100", uint64_t{80} << 30).Thread(0, 100, "python");
  uint64_t seq = 1;
  for (int batch = 0; batch < 12; ++batch) {
    std::vector<Ev> events;
    for (int i = 0; i < 3000; ++i, ++seq) {
      const uint64_t address = 0x7f0000000000 + (seq % 977) * 0x1000;
      events.push_back(seq % 2 == 1 ? Alloc(seq, static_cast<double>(seq) * 0.01, address, 4096 + seq % 64, 1)
                                    : Free(seq, static_cast<double>(seq) * 0.01, address - 0x1000 * 0));
    }
    // Two events a batch late: their numbers belong to this batch, they reach the file with the next one.
    if (batch % 3 == 1) std::swap(events[10], events[2990]);
    if (garbage && batch == 6) b.Raw("\x07garbage");
    b.Events(events);
    b.Thread(static_cast<uint32_t>(batch % 3), 100 + batch, absl::StrCat("worker-", batch));
    b.Strings(static_cast<uint32_t>(1 + batch * 2), {absl::StrCat("s", batch), absl::StrCat("t", batch)});
    b.StackNodes(static_cast<uint64_t>(1 + batch), {0}, {static_cast<uint64_t>(0x1000 + batch)});
    b.MemorySample(0, uint64_t{70} << 30, uint64_t{80} << 30, seq - 1);
    format::Packet phase;
    phase.mutable_phase()->set_after_seq(seq - 1);
    phase.mutable_phase()->set_kind(format::Phase::MARK);
    phase.mutable_phase()->set_name(absl::StrCat("step ", batch));
    b.Packet(phase);
  }
  b.Trailer(seq - 1, kStartNs + 1'000'000'000);
  return b;
}

TEST(Delivery, SecondThreadSeesWhatTheReadersThreadSees) {
  const TraceBuilder b = LongTrace();
  const std::string path = b.Write("delivery_long.pb");
  const Read same = ReadWith(path, DeliveryThread::kSame);
  ASSERT_TRUE(same.status.ok()) << same.status;
  ASSERT_EQ(same.stats.events, 36000u);
  EXPECT_GT(same.lines.size(), 36000u + 12 * 6);
  ExpectSameOnBothThreads(path);
}

// The reader says how far it has come about every MiB, after the events of what it read, and the second thread passes
// that on in its place: what a progress bar shows is the share of the file behind the events counted.
TEST(Delivery, ReadProgressComesInOrderAboutEveryMegabyte) {
  TraceBuilder b;
  b.Header().Device(0, "H100", uint64_t{80} << 30).Thread(0, 100, "python");
  uint64_t seq = 1;
  for (int batch = 0; batch < 160; ++batch) {
    std::vector<Ev> events;
    for (int i = 0; i < 3000; ++i, ++seq) {
      const uint64_t address = 0x7f0000000000 + (seq * 7919 % 100003) * 0x1000;  // addresses that do not repeat soon
      events.push_back(Alloc(seq, static_cast<double>(seq) * 0.01, address, 4096 + seq % 4093, 1));
    }
    b.Events(events);
  }
  b.Trailer(seq - 1, kStartNs + 1'000'000'000);
  const std::string path = b.Write("delivery_progress.pb");
  const uint64_t size = std::filesystem::file_size(path);
  ASSERT_GT(size, 3 * kReadProgressBytes);
  const Read read = ExpectSameOnBothThreads(path);
  ASSERT_TRUE(read.status.ok()) << read.status;
  uint64_t last = 0;
  size_t events_before_last = 0, progress_lines = 0, events = 0;
  for (const std::string& line : read.lines) {
    if (line.rfind("event ", 0) == 0) ++events;
    if (line.rfind("progress ", 0) != 0) continue;
    ++progress_lines;
    uint64_t bytes = 0, total = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "progress %lu %lu", &bytes, &total), 2) << line;
    EXPECT_EQ(total, size);
    EXPECT_LE(bytes, size);
    EXPECT_GE(bytes, last + kReadProgressBytes) << line;  // about every MiB, never back
    EXPECT_GT(events, events_before_last) << line;          // events came between
    // The events before it are those of the bytes before it, but for what the reorder window still holds (this
    // builder's batches carry no low-water marks) and a batch.
    EXPECT_GE(static_cast<double>(events + ReorderWindow::kDefaultCapacity + 3000),
              480000.0 * static_cast<double>(bytes) / static_cast<double>(size))
        << line;
    last = bytes;
    events_before_last = events;
  }
  EXPECT_GE(progress_lines, size / kReadProgressBytes - 1);
  EXPECT_LE(progress_lines, size / kReadProgressBytes);
}

TEST(Delivery, SameOnBothThreadsWhenCutOffOrDamaged) {
  const TraceBuilder b = LongTrace();
  const std::string& bytes = b.bytes();
  // Cut in the middle (the packet cut is lost), and bytes that are no packet between two (skipped).
  const Read cut = ExpectSameOnBothThreads(WriteTempFile("delivery_cut.pb", bytes.substr(0, bytes.size() / 2)));
  EXPECT_TRUE(cut.stats.truncated);
  EXPECT_GT(cut.stats.events, 0u);
  const Read skipped = ExpectSameOnBothThreads(LongTrace(/*garbage=*/true).Write("delivery_damaged.pb"));
  EXPECT_EQ(skipped.stats.damaged_packets, 1u);
  EXPECT_EQ(skipped.stats.events, 36000u);  // the garbage is skipped, every packet after it read
  // Not a trace: the same error, and no call.
  const std::string text = WriteTempFile("delivery_text.pb", "not a trace at all\n");
  EXPECT_FALSE(ReadWith(text, DeliveryThread::kSecond).status.ok());
  EXPECT_TRUE(ReadWith(text, DeliveryThread::kSecond).lines.empty());
  ExpectSameOnBothThreads(text);
}

// While the visitor's thread is behind, the reader's thread offers its time (HelpWhileReaderWaits) before it
// waits, and only then: never on the visitor's thread, never with the second thread off. The visitor holds its first
// chunk until it is offered help, so the reader fills the queue and must wait (36 000 events: four full chunks
// queued, a fifth to hand); a reader that never offers it fails the test after 20 s instead of hanging.
class SlowVisitor : public TraceVisitor {
 public:
  void OnEvents(absl::Span<const Event> events) override {
    visitor_thread = std::this_thread::get_id();
    if (events_ == 0) {
      std::unique_lock<std::mutex> lock(mutex_);
      helped_.wait_for(lock, std::chrono::seconds(20), [&] { return help_calls > 0; });
    }
    events_ += events.size();
  }
  bool HelpWhileReaderWaits() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++help_calls;
      if (std::this_thread::get_id() != reader_thread) ++help_calls_elsewhere;
    }
    helped_.notify_all();
    return help_calls % 2 == 0;  // work half the time: the reader asks again, and else waits
  }
  std::thread::id reader_thread = std::this_thread::get_id();
  std::thread::id visitor_thread;
  uint64_t events_ = 0;
  std::mutex mutex_;
  std::condition_variable helped_;
  uint64_t help_calls = 0;
  uint64_t help_calls_elsewhere = 0;
};

TEST(Delivery, TheReadersThreadHelpsWhileTheVisitorIsBehind) {
  const std::string path = LongTrace().Write("delivery_help.pb");
  SlowVisitor second;
  ASSERT_TRUE(ReadTrace(path, second, nullptr, DeliveryThread::kSecond).ok());
  EXPECT_EQ(second.events_, 36000u);
  EXPECT_NE(second.visitor_thread, second.reader_thread);
  EXPECT_GT(second.help_calls, 0u);
  EXPECT_EQ(second.help_calls_elsewhere, 0u);
  SlowVisitor same;
  same.help_calls = 1;  // nothing to wait for on one thread
  ASSERT_TRUE(ReadTrace(path, same, nullptr, DeliveryThread::kSame).ok());
  EXPECT_EQ(same.events_, 36000u);
  EXPECT_EQ(same.help_calls, 1u);
}

// With decoders (batch_decoders.h), a batch that goes straight to the visitor is decoded whole on another thread
// and reaches the visitor as one span, in its place (batches the window must reorder are decoded by the reader as
// before: LongTrace's, compared above). 40 batches: the decoders' jobs are each used several times.
class SpanLog : public TraceVisitor {
 public:
  void OnEvents(absl::Span<const Event> events) override {
    spans.push_back(events.size());
    for (const Event& e : events) seqs.push_back(e.seq);
  }
  void OnMemorySample(const MemorySample&) override { spans.push_back(0); }
  std::vector<size_t> spans;  // 0: a memory sample between them
  std::vector<uint64_t> seqs;
};

TEST(Delivery, DecodersHandEachBatchOverWholeInItsPlace) {
  TraceBuilder b;
  b.Header().Device(0, "H100", uint64_t{80} << 30).Thread(0, 100, "python");
  uint64_t seq = 1;
  std::vector<size_t> expected;
  for (int n = 0; n < 40; ++n) {
    std::vector<Ev> events;
    const int rows = 1000 + n * 10;
    for (int i = 0; i < rows; ++i, ++seq) {
      events.push_back(Alloc(seq, static_cast<double>(seq) * 0.01, 0x7f0000000000 + seq * 0x1000, 4096, 1));
    }
    format::EventBatch batch = TraceBuilder::Encode(events);
    batch.set_complete_below(seq);  // every row below it is written: the window may pass the batch on
    b.Batch(batch);
    b.MemorySample(0, uint64_t{70} << 30, uint64_t{80} << 30, seq - 1);
    expected.push_back(static_cast<size_t>(rows));
    expected.push_back(0);
  }
  b.Trailer(seq - 1, kStartNs + 1'000'000'000);
  const std::string path = b.Write("delivery_decoders.pb");
  SpanLog log;
  ReadStats stats;
  ASSERT_TRUE(ReadTrace(path, log, &stats, DeliveryThread::kDecodersToo).ok());
  EXPECT_EQ(log.spans, expected);
  ASSERT_EQ(log.seqs.size(), seq - 1);
  for (size_t i = 0; i < log.seqs.size(); ++i) ASSERT_EQ(log.seqs[i], i + 1);
  EXPECT_EQ(stats.events, seq - 1);
  ExpectSameOnBothThreads(path);
}

// Every real trace in examples/ (PyTorch, CuPy, JAX, CUDA C++; several formats; NVTX phases; an OOM).
TEST(Delivery, SameOnBothThreadsForEveryExample) {
  int traces = 0;
  for (const auto& entry : std::filesystem::directory_iterator(CUMEMTRACE_EXAMPLES_DIR)) {
    if (entry.path().extension() != ".pb") continue;
    const Read same = ExpectSameOnBothThreads(entry.path().string());
    EXPECT_TRUE(same.status.ok()) << entry.path() << ": " << same.status;
    ++traces;
  }
  EXPECT_GE(traces, 10);
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
