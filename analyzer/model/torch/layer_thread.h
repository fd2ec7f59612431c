// Runs the scan's AllocatorLayer apart from the rest of the model, so that replaying PyTorch's allocator (the
// costliest part of the model on a PyTorch trace: a tree lookup and a block's memory touched per event) overlaps the
// rest of the model instead of adding to it.
//
// The scan needs the layer's state only at a few moments: a failed allocation, an OOM, the allocator's attachment,
// the end, and after every event while phases are followed. Until one of those, events are queued in batches;
// layer() then waits until every queued event is applied, and from that moment the calling thread has the layer to
// itself (no other thread touches it while nothing is queued). While phases are followed (their peaks need the
// tensors' bytes after each event), RunInline() makes every later Apply() a plain call. Whichever thread applies a
// batch, the layer sees the same events, in the same order, with the same stamps, so it ends in the same state: the
// reports cannot tell the difference.
//
// Who applies the queued batches (Mode):
//   kOwnThread  a thread of the layer's own, started with the first batch (where the machine has a core for it);
//   kShared     whichever thread would otherwise wait: the trace reader's while it waits for the model's thread
//               (HelpOnce(), through TraceVisitor::HelpWhileReaderWaits), and the model's thread itself when the
//               queue is full. On two cores, three busy threads only took turns; this way the layer's work fills
//               the time the reader spent waiting.
//   kInline     nobody: every Apply() is a plain call.
// Where the process can start no thread, kOwnThread falls back to inline. Memory: batches of kBatchSteps slim copies
// of the events, at most kMaxQueuedBatches queued, one being applied and one filling (about 2 MB).
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

  enum class Mode { kOwnThread, kShared, kInline };

  explicit LayerThread(Mode mode) : mode_(mode), shared_(mode == Mode::kShared) {}
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
  // kShared, from any thread: applies the oldest queued batch, if there is one and no other thread is applying one;
  // returns whether it did. Never waits for another thread (it takes the lock, and applies a whole batch).
  bool HelpOnce();

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

  void ApplyStep(const Step& step);  // a queued step, on whichever thread applies its batch
  void ApplyNow(const Event& event, uint64_t index, const AutogradStamp& stamp);
  // Takes the oldest queued batch and applies it outside the lock; `lock` holds mutex_, the queue is not empty and no
  // batch is being applied. noexcept: a throw (no memory) in the middle would leave busy_ set and every other thread
  // waiting for ever; it ends the process instead, as it did on the layer's own thread.
  void ApplyOldest(std::unique_lock<std::mutex>& lock) noexcept;
  void Hand();                       // pending_ to the queue (making room first while it is full); starts the thread
  bool StartThread();                // false if the process could not start one (the layer then runs inline)
  void Run();                        // the layer's own thread
  void Wait();                       // until the queue is empty and no batch is being applied

  AllocatorLayer layer_;
  absl::flat_hash_map<int32_t, uint32_t> passes_at_allocated_peak_;  // per device
  // The scan's thread only: kInline once RunInline() was called or no thread could start.
  Mode mode_;
  const bool shared_;  // made kShared: other threads may apply batches (read by them, so never changed)

  // The scan's thread only:
  std::vector<Step> pending_;

  std::mutex mutex_;
  std::condition_variable changed_;
  // Guarded by mutex_:
  std::deque<std::vector<Step>> queue_;
  bool busy_ = false;   // a thread is applying a batch it took off the queue
  bool stop_ = false;
  std::vector<std::vector<Step>> spare_;  // batches already applied, for reuse

  std::thread thread_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_TORCH_LAYER_THREAD_H_
