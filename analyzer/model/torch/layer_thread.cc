// LayerThread (see layer_thread.h).
#include "analyzer/model/torch/layer_thread.h"

#include <pthread.h>

#include <system_error>
#include <utility>

namespace cumemtrace::analyzer {

LayerThread::~LayerThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

static_assert(static_cast<uint32_t>(format::Api::kTorchFree) < 65536 &&
              static_cast<uint32_t>(format::Api::kTorchOom) < 65536, "a Step keeps the api in 16 bits");

void LayerThread::Apply(const Event& e, uint64_t index, const AutogradStamp& stamp) {
  if (!format::IsTorchApi(e.api)) return;  // the layer reads nothing else (and a Step keeps the api in 16 bits)
  if (mode_ == Mode::kInline) {
    ApplyNow(e, index, stamp);  // no Step in between: when nothing overlaps, that copy was most of this class's cost
    return;
  }
  if (pending_.capacity() == 0) pending_.reserve(kBatchSteps);
  pending_.push_back(Step{e.seq, e.time_ns, e.address, e.size, e.stream, e.stack, index, e.device, e.thread,
                          stamp.epoch, static_cast<uint16_t>(e.api), stamp.grad, stamp.backward});
  if (pending_.size() == kBatchSteps) Hand();
}

void LayerThread::ApplyStep(const Step& s) {
  Event e;
  e.seq = s.seq;
  e.time_ns = s.time_ns;
  e.api = static_cast<format::Api>(s.api);
  e.info = format::FindApi(s.api);
  e.device = s.device;
  e.address = s.address;
  e.size = s.size;
  e.stream = s.stream;
  e.stack = s.stack;
  e.thread = s.thread;
  AutogradStamp stamp;
  stamp.grad = s.grad;
  stamp.backward = s.backward;
  stamp.epoch = s.epoch;
  ApplyNow(e, s.index, stamp);
}

void LayerThread::ApplyNow(const Event& e, uint64_t index, const AutogradStamp& stamp) {
  const bool block_alloc = format::IsTorchBlockAlloc(e.api);
  if (block_alloc) layer_.SetAutograd(stamp);
  layer_.Apply(e, index);
  if (block_alloc) {
    const TorchDeviceStats* stats = layer_.Find(e.device);
    if (stats != nullptr && stats->allocated_bytes.peak_at.index == index) {
      passes_at_allocated_peak_[e.device] = stamp.epoch;
    }
  }
}

void LayerThread::ApplyOldest(std::unique_lock<std::mutex>& lock) noexcept {
  std::vector<Step> batch = std::move(queue_.front());
  queue_.pop_front();
  busy_ = true;
  lock.unlock();
  changed_.notify_all();  // a place in the queue is free
  for (const Step& s : batch) ApplyStep(s);
  lock.lock();
  busy_ = false;
  if (spare_.size() < kMaxQueuedBatches) spare_.push_back(std::move(batch));
  changed_.notify_all();  // the queue may be empty now, and the next batch may be taken
}

void LayerThread::Hand() {
  if (mode_ == Mode::kOwnThread && !thread_.joinable() && !StartThread()) {
    for (const Step& s : pending_) ApplyStep(s);  // no thread to be had: this one applies them, now and from now on
    pending_.clear();
    mode_ = Mode::kInline;
    return;
  }
  std::vector<Step> next;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // A full queue: the layer's own thread makes room; shared, this thread does, unless another one is applying.
    while (queue_.size() >= kMaxQueuedBatches) {
      if (mode_ == Mode::kShared && !busy_) {
        ApplyOldest(lock);
      } else {
        changed_.wait(lock);
      }
    }
    queue_.push_back(std::move(pending_));
    if (!spare_.empty()) {
      next = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  changed_.notify_all();
  next.clear();
  next.reserve(kBatchSteps);
  pending_ = std::move(next);
}

bool LayerThread::StartThread() {
  try {
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "cumem-layer");  // what `top -H` and perf show for it
      Run();
    });
    return true;
  } catch (const std::system_error&) {  // the process may start no more threads (a limit, no memory)
    return false;
  }
}

void LayerThread::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return !queue_.empty() || stop_; });
    if (stop_) return;
    ApplyOldest(lock);
  }
}

bool LayerThread::HelpOnce() {
  if (!shared_) return false;
  std::unique_lock<std::mutex> lock(mutex_);
  if (queue_.empty() || busy_) return false;
  ApplyOldest(lock);
  return true;
}

void LayerThread::Wait() {
  if (!pending_.empty()) Hand();
  if (mode_ == Mode::kInline && !thread_.joinable()) return;
  // Batches are applied only between taking one and clearing busy_, both under mutex_: once this sees the queue
  // empty and no batch being applied, every write made to the layer is visible here. Shared, this thread applies
  // what is left itself.
  std::unique_lock<std::mutex> lock(mutex_);
  while (!queue_.empty() || busy_) {
    if (mode_ == Mode::kShared && !busy_) {
      ApplyOldest(lock);
    } else {
      changed_.wait(lock);
    }
  }
}

AllocatorLayer& LayerThread::layer() {
  Wait();
  return layer_;
}

void LayerThread::RunInline() {
  if (mode_ == Mode::kInline) return;
  Wait();
  mode_ = Mode::kInline;
}

uint32_t LayerThread::PassesAtAllocatedPeak(int32_t device) {
  Wait();
  auto it = passes_at_allocated_peak_.find(device);
  return it == passes_at_allocated_peak_.end() ? 0 : it->second;
}

}  // namespace cumemtrace::analyzer
