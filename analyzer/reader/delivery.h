// Makes a visitor's calls on a second thread, in the order the trace reader made them, while the reader goes on
// framing, inflating, decoding and ordering the packets that follow. Decoding needs nothing the visitor computes,
// so the two overlap: on a long trace the visitor (the model and the reports) is the larger part, and the reader's
// part then costs no wall time.
//
// The visitor sees the same metadata and events in the same order as without it, from one thread at a time, and
// every call has been made when Finish() returns: a visitor needs no locks and cannot tell the difference. Only
// the events' chunks differ (OnEvents spans are as long as the reader had ready, which visitors must not rely on):
// they are copied out of the reader's buffers (which it reuses) into chunks of up to kChunkEvents. The one call
// made on the reader's thread is TraceVisitor::HelpWhileReaderWaits, while the visitor's thread is behind: a visitor
// that does work there guards it itself (ScanPass: LayerThread's shared mode).
//
// Memory: the second thread is at most kMaxQueuedChunks chunks (about 1 MiB each) behind the reader; a batch decoded
// apart counts as one.
#ifndef CUMEMTRACE_ANALYZER_READER_DELIVERY_H_
#define CUMEMTRACE_ANALYZER_READER_DELIVERY_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "analyzer/reader/batch_decoders.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

class Delivery final : public TraceVisitor {
 public:
  static constexpr size_t kChunkEvents = 8192;
  static constexpr size_t kMaxQueuedChunks = 4;

  // Starts the second thread, which calls `target`. Call Finish() before `target` is used elsewhere.
  explicit Delivery(TraceVisitor& target);
  ~Delivery() override { Finish(); }
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;

  void OnHeader(const TraceHeader& v) override { Add(v); }
  void OnDevice(const DeviceInfo& v) override { Add(v); }
  void OnThread(const ThreadInfo& v) override { Add(v); }
  void OnModule(const ModuleInfo& v) override { Add(v); }
  void OnStackNode(const StackNode& v) override { Add(v); }
  void OnString(uint32_t id, const std::string& value) override { Add(StringEntry{id, value}); }
  void OnSymbol(const SymbolInfo& v) override { Add(v); }
  void OnPythonFrame(const PythonFrameInfo& v) override { Add(v); }
  void OnMemorySample(const MemorySample& v) override { Add(v); }
  void OnNotice(const NoticeInfo& v) override { Add(v); }
  void OnAllocatorAttach(const AllocatorAttachInfo& v) override { Add(v); }
  void OnPhase(const PhaseInfo& v) override { Add(v); }
  void OnGpuProcesses(const GpuProcessesInfo& v) override { Add(v); }
  void OnTrailer(const TrailerInfo& v) override { Add(v); }
  void OnReadProgress(uint64_t bytes_read, uint64_t file_bytes) override { Add(ReadProgress{bytes_read, file_bytes}); }
  void OnEvent(const Event& e) override { OnEvents(absl::Span<const Event>(&e, 1)); }
  void OnEvents(absl::Span<const Event> events) override;
  // A batch's events, in their place among the calls, that `decoders` decodes apart (batch_decoders.h): the second
  // thread waits for them, passes them on and releases the job.
  void OnEventsDecodedApart(DecodeJob* job, BatchDecoders* decoders);

  // Makes every call still queued and stops the second thread.
  void Finish();

 private:
  struct StringEntry {
    uint32_t id;
    std::string value;
  };
  struct ReadProgress {
    uint64_t bytes_read;
    uint64_t file_bytes;
  };
  // Events handed over one after another, with nothing between them: one OnEvents call per entry.
  struct EventsEntry {
    std::vector<Event> events;
  };
  struct DecodedApartEntry {
    DecodeJob* job;
    BatchDecoders* decoders;
  };
  using Entry = std::variant<TraceHeader, DeviceInfo, ThreadInfo, ModuleInfo, StackNode, StringEntry, SymbolInfo,
                             PythonFrameInfo, MemorySample, NoticeInfo, AllocatorAttachInfo, PhaseInfo,
                             GpuProcessesInfo, TrailerInfo, ReadProgress, EventsEntry, DecodedApartEntry>;
  // Metadata waits in pending_ with the events, so that the lock is taken about once per chunk.
  static constexpr size_t kPendingEntries = 512;

  template <typename T>
  void Add(T&& value) {
    pending_.emplace_back(std::forward<T>(value));
    if (pending_.size() >= kPendingEntries) Hand(false);
  }
  // Moves pending_ to the queue (first waiting while kMaxQueuedChunks chunks are queued); `last` tells the thread
  // to stop once it has made those calls.
  void Hand(bool last);
  void Run();  // the second thread
  void Call(Entry& entry);
  std::vector<Event> SpareBuffer();

  TraceVisitor& target_;
  bool finished_ = false;

  // The reader's thread only:
  std::vector<Entry> pending_;
  size_t pending_events_ = 0;
  bool pending_decoded_apart_ = false;  // pending_ holds a DecodedApartEntry: it counts as a queued chunk

  std::mutex mutex_;
  std::condition_variable changed_;
  // Guarded by mutex_:
  std::deque<std::vector<Entry>> queue_;
  size_t queued_chunks_ = 0;
  bool last_handed_ = false;
  std::vector<std::vector<Event>> spare_;  // event buffers the visitor is done with

  std::thread thread_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_READER_DELIVERY_H_
