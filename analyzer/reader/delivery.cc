// Delivery (see delivery.h).
#include "analyzer/reader/delivery.h"

#include <pthread.h>

#include <algorithm>
#include <type_traits>

namespace cumemtrace::analyzer {
namespace {

// Spare buffers kept beyond the queued chunks: enough that the reader rarely allocates one.
constexpr size_t kMaxSpareBuffers = Delivery::kMaxQueuedChunks + 2;

}  // namespace

Delivery::Delivery(TraceVisitor& target) : target_(target) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "cumem-model");  // what `top -H` and perf show for it
    Run();
  });
}

std::vector<Event> Delivery::SpareBuffer() {
  std::vector<Event> buffer;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!spare_.empty()) {
      buffer = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  buffer.clear();
  buffer.reserve(kChunkEvents);
  return buffer;
}

void Delivery::OnEvents(absl::Span<const Event> events) {
  while (!events.empty()) {
    auto* last = pending_.empty() ? nullptr : std::get_if<EventsEntry>(&pending_.back());
    if (last == nullptr) last = &std::get<EventsEntry>(pending_.emplace_back(EventsEntry{SpareBuffer()}));
    const size_t take = std::min(events.size(), kChunkEvents - pending_events_);
    last->events.insert(last->events.end(), events.begin(), events.begin() + static_cast<std::ptrdiff_t>(take));
    events.remove_prefix(take);
    pending_events_ += take;
    if (pending_events_ == kChunkEvents) Hand(false);
  }
}

void Delivery::OnEventsDecodedApart(DecodeJob* job, BatchDecoders* decoders) {
  pending_.emplace_back(DecodedApartEntry{job, decoders});
  pending_decoded_apart_ = true;
  // Handed now: the job goes back to the decoders only once the second thread has passed its events on, and the
  // reader may be about to wait for a free one.
  Hand(false);
}

void Delivery::Hand(bool last) {
  const bool chunk = pending_events_ != 0 || pending_decoded_apart_;
  std::unique_lock<std::mutex> lock(mutex_);
  // The visitor's thread is behind: work it can hand off is done here first, the wait comes when there is none.
  while (chunk && queued_chunks_ >= kMaxQueuedChunks) {
    lock.unlock();
    const bool helped = target_.HelpWhileReaderWaits();
    lock.lock();
    if (!helped) changed_.wait(lock, [&] { return queued_chunks_ < kMaxQueuedChunks; });
  }
  if (!pending_.empty()) {
    queue_.push_back(std::move(pending_));
    pending_.clear();
  }
  queued_chunks_ += chunk ? 1 : 0;
  pending_events_ = 0;
  pending_decoded_apart_ = false;
  last_handed_ = last_handed_ || last;
  changed_.notify_all();
}

void Delivery::Run() {
  while (true) {
    std::vector<Entry> entries;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return !queue_.empty() || last_handed_; });
      if (queue_.empty()) return;  // every call was made
      entries = std::move(queue_.front());
      queue_.pop_front();
    }
    bool chunk = false;
    for (Entry& e : entries) {
      chunk = chunk || std::holds_alternative<EventsEntry>(e) || std::holds_alternative<DecodedApartEntry>(e);
      Call(e);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (Entry& e : entries) {
      if (auto* events = std::get_if<EventsEntry>(&e); events != nullptr && spare_.size() < kMaxSpareBuffers) {
        spare_.push_back(std::move(events->events));
      }
    }
    if (chunk) {
      --queued_chunks_;
      changed_.notify_all();
    }
  }
}

void Delivery::Call(Entry& entry) {
  std::visit(
      [this](auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, EventsEntry>) target_.OnEvents(v.events);
        if constexpr (std::is_same_v<T, DecodedApartEntry>) {
          v.decoders->Wait(v.job);
          if (!v.job->events.empty()) target_.OnEvents(v.job->events);
          v.decoders->Release(v.job);
        }
        if constexpr (std::is_same_v<T, StringEntry>) target_.OnString(v.id, v.value);
        if constexpr (std::is_same_v<T, TraceHeader>) target_.OnHeader(v);
        if constexpr (std::is_same_v<T, DeviceInfo>) target_.OnDevice(v);
        if constexpr (std::is_same_v<T, ThreadInfo>) target_.OnThread(v);
        if constexpr (std::is_same_v<T, ModuleInfo>) target_.OnModule(v);
        if constexpr (std::is_same_v<T, StackNode>) target_.OnStackNode(v);
        if constexpr (std::is_same_v<T, SymbolInfo>) target_.OnSymbol(v);
        if constexpr (std::is_same_v<T, PythonFrameInfo>) target_.OnPythonFrame(v);
        if constexpr (std::is_same_v<T, MemorySample>) target_.OnMemorySample(v);
        if constexpr (std::is_same_v<T, NoticeInfo>) target_.OnNotice(v);
        if constexpr (std::is_same_v<T, AllocatorAttachInfo>) target_.OnAllocatorAttach(v);
        if constexpr (std::is_same_v<T, PhaseInfo>) target_.OnPhase(v);
        if constexpr (std::is_same_v<T, GpuProcessesInfo>) target_.OnGpuProcesses(v);
        if constexpr (std::is_same_v<T, TrailerInfo>) target_.OnTrailer(v);
        if constexpr (std::is_same_v<T, ReadProgress>) target_.OnReadProgress(v.bytes_read, v.file_bytes);
      },
      entry);
}

void Delivery::Finish() {
  if (finished_) return;
  finished_ = true;
  Hand(true);
  thread_.join();
}

}  // namespace cumemtrace::analyzer
