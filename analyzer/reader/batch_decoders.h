// Decodes event batches' rows on threads of their own, so that the reader's thread only frames, inflates and
// checks packets: on a machine of many slower cores (a GPU host) the reader's thread, which also turned every row
// into an Event, was as long as the model's.
//
// A batch's rows are independent of every other batch's once its columns are parsed and checked: the reader does
// that (in file order, so damage is found and reported as without these threads) and decides where the rows go;
// a batch that goes straight to the visitor (the usual case: ReorderWindow::BeginPassThrough) is handed to a
// worker here and, in the same place of the reader's calls, to the second thread (delivery.h), which waits for its
// rows and passes them on. The visitor sees the same events in the same order.
//
// Memory: kJobs batches at most (each up to a batch of Events, 8192 rows, 850 KB, plus its columns).
#ifndef CUMEMTRACE_ANALYZER_READER_BATCH_DECODERS_H_
#define CUMEMTRACE_ANALYZER_READER_BATCH_DECODERS_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "analyzer/reader/event_batch_decoder.h"
#include "analyzer/reader/event_batch_wire.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

// One batch on its way: the reader fills `inflated`, parses `wire` from it and starts `decoder`; a worker fills
// `events`. Reused from batch to batch, so each buffer only grows.
struct DecodeJob {
  std::string inflated;
  EventBatchWire wire;
  EventBatchDecoder decoder;
  std::vector<Event> events;
  bool decoded = false;  // guarded by BatchDecoders' lock
};

class BatchDecoders {
 public:
  // More than the second thread may hold queued (Delivery::kMaxQueuedChunks) plus the one it is passing on and
  // the one the reader fills: the reader never waits for a free job while a queued one could be released.
  static constexpr size_t kJobs = 8;

  // Starts `workers` threads (at least one; where none can start, Submit() decodes on the calling thread).
  explicit BatchDecoders(unsigned workers);
  ~BatchDecoders();
  BatchDecoders(const BatchDecoders&) = delete;
  BatchDecoders& operator=(const BatchDecoders&) = delete;

  // A job no one uses (waits until one is released).
  DecodeJob* Acquire();
  // The job's decoder is started: its rows are decoded into job->events by a worker.
  void Submit(DecodeJob* job);
  // Waits until the job's rows are decoded.
  void Wait(DecodeJob* job);
  // The job is done with (decoded or never submitted): Acquire() may hand it out again.
  void Release(DecodeJob* job);

 private:
  void Run();  // a worker
  static void Decode(DecodeJob* job);

  std::vector<DecodeJob> jobs_{kJobs};
  std::mutex mutex_;
  std::condition_variable changed_;
  // Guarded by mutex_:
  std::vector<DecodeJob*> free_;
  std::deque<DecodeJob*> submitted_;
  bool stop_ = false;

  std::vector<std::thread> threads_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_READER_BATCH_DECODERS_H_
