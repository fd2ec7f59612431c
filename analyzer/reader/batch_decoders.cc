// BatchDecoders (see batch_decoders.h).
#include "analyzer/reader/batch_decoders.h"

#include <pthread.h>

#include <algorithm>
#include <system_error>

namespace cumemtrace::analyzer {

BatchDecoders::BatchDecoders(unsigned workers) {
  for (DecodeJob& job : jobs_) free_.push_back(&job);
  for (unsigned i = 0; i < std::max(workers, 1u); ++i) {
    try {
      threads_.emplace_back([this] {
        pthread_setname_np(pthread_self(), "cumem-decode");  // what `top -H` and perf show for it
        Run();
      });
    } catch (const std::system_error&) {  // the process may start no more threads (a limit, no memory)
      break;
    }
  }
}

BatchDecoders::~BatchDecoders() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();
}

DecodeJob* BatchDecoders::Acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !free_.empty(); });
  DecodeJob* job = free_.back();
  free_.pop_back();
  job->decoded = false;
  return job;
}

void BatchDecoders::Decode(DecodeJob* job) {
  job->events.resize(job->decoder.remaining());
  job->decoder.Next(job->events.data(), job->events.size());
}

void BatchDecoders::Submit(DecodeJob* job) {
  if (threads_.empty()) {
    Decode(job);
    std::lock_guard<std::mutex> lock(mutex_);
    job->decoded = true;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    submitted_.push_back(job);
  }
  changed_.notify_all();
}

void BatchDecoders::Wait(DecodeJob* job) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return job->decoded; });
}

void BatchDecoders::Release(DecodeJob* job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(job);
  }
  changed_.notify_all();
}

void BatchDecoders::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return !submitted_.empty() || stop_; });
    if (submitted_.empty()) return;  // stopping, and nothing is left to decode
    DecodeJob* job = submitted_.front();
    submitted_.pop_front();
    lock.unlock();
    Decode(job);
    lock.lock();
    job->decoded = true;
    changed_.notify_all();
  }
}

}  // namespace cumemtrace::analyzer
