// Runs the scan's AllocatorLayer on a thread of its own, so that replaying PyTorch's allocator (the costliest part
// of the model on a PyTorch trace: a tree lookup and a block's memory touched per event) overlaps the rest of the
// model instead of adding to it.
//
// The scan needs the layer's state only at a few moments: a failed allocation, an OOM, the allocator's attachment,
// the end, and after every event while phases are followed. Until one of those, events are queued in batches for
// the layer's thread; layer() then waits until every queued event is applied, and from that moment the calling
// thread has the layer to itself (the layer's thread only touches it while events are queued). While phases are
// followed (their peaks need the tensors' bytes after each event), RunInline() makes every later Apply() a plain
// call. Either way the layer sees the same events, in the same order, with the same stamps, so it ends in the same
// state: the reports cannot tell the difference.
//
// The thread starts with the first batch, so a trace without PyTorch events never starts it; where the process can
// start no thread, the layer runs inline. Memory: batches of kBatchSteps slim copies of the events, at most
// kMaxQueuedBatches queued, one being applied and one filling (about 2 MB).
#ifndef CUMEMTRACE_ANALYZER_MODEL_TORCH_LAYER_THREAD_H_
#define CUMEMTRACE_ANALYZER_MODEL_TORCH_LAYER_THREAD_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analyzer/model/torch/allocator_layer.h"
#include "analyzer/model/torch/autograd_passes.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

class LayerThread {
 public:
  static constexpr size_t kBatchSteps = 4096;
  static constexpr size_t kMaxQueuedBatches = 4;

  // `threaded`: false makes every call inline from the start (no core to spare for the layer).
  explicit LayerThread(bool threaded) : threaded_(threaded) {}
  ~LayerThread();
  LayerThread(const LayerThread&) = delete;
  LayerThread& operator=(const LayerThread&) = delete;

  // Applies a TORCH_* event as AllocatorLayer::SetAutograd(stamp) then Apply(event, index) would. A block
  // allocation's stamp.epoch (the backward passes begun when it came) is remembered for the device's allocated peak
  // (PassesAtAllocatedPeak).
  void Apply(const Event& event, uint64_t index, const AutogradStamp& stamp);
  // The layer with every event applied so far. Waits for the layer's thread.
  AllocatorLayer& layer();
  // Every later Apply() is made on the calling thread, right away (after the queued ones).
  void RunInline();
  // The backward passes begun when the device's allocated bytes last reached their peak (0 if never). Waits for the
  // layer's thread.
  uint32_t PassesAtAllocatedPeak(int32_t device);

 private:
  // What the layer reads of an event, with the stamp the scan gave it, copied once per PyTorch event: the scan's
  // thread writes it into memory the layer's thread read last, so every byte left out is time (72 bytes of an
  // Event's 104; the api table entry is looked up again on the layer's thread).
  struct Step {
    uint64_t seq;
    int64_t time_ns;
    uint64_t address;
    uint64_t size;
    uint64_t stream;
    uint64_t stack;
    uint64_t index;
    int32_t device;
    uint32_t thread;
    uint32_t epoch;
    uint16_t api;  // every TORCH_* api is below 2^16 (format.h)
    format::GradMode grad;
    bool backward;
  };

  void ApplyStep(const Step& step);  // a queued step: on the layer's thread, or here if none could start
  void ApplyNow(const Event& event, uint64_t index, const AutogradStamp& stamp);
  void Hand();                       // pending_ to the queue (waiting while it is full); starts the thread
  bool StartThread();                // false if the process could not start one (the layer then runs inline)
  void Run();                        // the layer's thread
  void Wait();                       // until the queue is empty and the thread idle

  AllocatorLayer layer_;
  absl::flat_hash_map<int32_t, uint32_t> passes_at_allocated_peak_;  // per device
  bool threaded_;

  // The scan's thread only:
  std::vector<Step> pending_;

  std::mutex mutex_;
  std::condition_variable changed_;
  // Guarded by mutex_:
  std::deque<std::vector<Step>> queue_;
  bool busy_ = false;   // the layer's thread is applying a batch it took off the queue
  bool stop_ = false;
  std::vector<std::vector<Step>> spare_;  // batches the layer's thread is done with

  std::thread thread_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_LAYER_THREAD_H_
