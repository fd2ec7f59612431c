// Sequence numbers and the low-water mark (preload/sequence.h). The relation tested: CompleteBelow() is never above a
// number still pending (the reader would release events before one that has not arrived), and it is exactly the
// lowest pending number (or the next number, when none is pending) wherever the pending numbers fit the slot table;
// beyond the table (more threads inside a free at once than it has slots) it may lag, never pass.
//
// The recorder's lock is stood in for by a std::mutex: every call here is made holding it, as the recorder does.
#include "preload/sequence.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace cumemtrace::preload {
namespace {

std::mutex g_recorder_lock;

uint64_t TakePending() {
  std::lock_guard<std::mutex> hold(g_recorder_lock);
  return TakePendingSequenceLocked();
}

uint64_t TakeAppended() {
  std::lock_guard<std::mutex> hold(g_recorder_lock);
  return TakeAppendedSequenceLocked();
}

void Done(uint64_t seq) {
  std::lock_guard<std::mutex> hold(g_recorder_lock);
  SequenceDoneLocked(seq);
}

uint64_t Mark() {
  std::lock_guard<std::mutex> hold(g_recorder_lock);
  return CompleteBelow();
}

TEST(Sequence, APendingNumberHoldsTheMarkUntilItIsDone) {
  const uint64_t free_seq = TakePending();
  EXPECT_TRUE(SequencePending(free_seq));
  const uint64_t a = TakeAppended();
  const uint64_t b = TakeAppended();
  EXPECT_EQ(a, free_seq + 1);
  EXPECT_EQ(b, free_seq + 2);
  EXPECT_EQ(LastSequence(), b);
  EXPECT_EQ(Mark(), free_seq);
  Done(free_seq);
  EXPECT_FALSE(SequencePending(free_seq));
  EXPECT_EQ(Mark(), b + 1);
  Done(free_seq);  // idempotent: a number no longer pending is ignored
  Done(b + 100);   // and one never taken
  EXPECT_EQ(Mark(), b + 1);
}

TEST(Sequence, NestedNumbersOfOneThreadHoldTheMarkAtTheLowest) {
  // A runtime free around a driver free: the runtime's number first, the driver's inside it.
  const uint64_t outer = TakePending();
  const uint64_t inner = TakePending();
  TakeAppended();
  EXPECT_EQ(Mark(), outer);
  Done(outer);  // done out of order: the inner one still holds the mark
  EXPECT_EQ(Mark(), inner);
  Done(inner);
  EXPECT_EQ(Mark(), LastSequence() + 1);
}

TEST(Sequence, MoreNumbersThanAThreadKeepsLetTheMarkWaitForTheOlderOnes) {
  std::vector<uint64_t> taken;
  for (int i = 0; i < 12; ++i) taken.push_back(TakePending());  // more than kMaxPendingPerThread (8)
  EXPECT_EQ(Mark(), taken.front());
  for (uint64_t seq : taken) Done(seq);
  EXPECT_EQ(Mark(), LastSequence() + 1);
}

// Threads that each take a pending number and hold it until told to finish; finished in a given order, the mark
// is checked against the numbers still pending after each.
class PendingThreads {
 public:
  explicit PendingThreads(int count) : seqs_(count, 0), release_(count, false) {
    for (int i = 0; i < count; ++i) go_.push_back(std::make_unique<std::condition_variable>());
    for (int i = 0; i < count; ++i) {
      threads_.emplace_back([this, i] {
        const uint64_t seq = TakePending();
        std::unique_lock<std::mutex> lock(mu_);
        seqs_[i] = seq;
        ++taken_;
        changed_.notify_all();
        go_[i]->wait(lock, [&] { return release_[i]; });
        lock.unlock();
        Done(seq);
        lock.lock();
        ++done_;
        changed_.notify_all();
      });
    }
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return taken_ == static_cast<int>(threads_.size()); });
  }
  ~PendingThreads() {
    for (size_t i = 0; i < threads_.size(); ++i) Finish(static_cast<int>(i));
    for (std::thread& t : threads_) t.join();
  }

  const std::vector<uint64_t>& seqs() const { return seqs_; }

  // Lets thread i finish and waits until its number is done.
  void Finish(int i) {
    std::unique_lock<std::mutex> lock(mu_);
    if (release_[i]) return;
    release_[i] = true;
    const int target = done_ + 1;
    go_[i]->notify_one();
    changed_.wait(lock, [&] { return done_ >= target; });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;                          // the main thread waits on it
  std::vector<std::unique_ptr<std::condition_variable>> go_;  // thread i waits on go_[i]
  std::vector<std::thread> threads_;
  std::vector<uint64_t> seqs_;
  std::vector<bool> release_;
  int taken_ = 0;
  int done_ = 0;
};

// Thread indices ordered so that the lowest numbers finish neither first nor last: the highest first, then the
// lowest, alternating.
std::vector<int> AlternatingOrder(const std::vector<uint64_t>& seqs) {
  std::vector<int> by_seq(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) by_seq[i] = static_cast<int>(i);
  std::sort(by_seq.begin(), by_seq.end(), [&](int a, int b) { return seqs[a] < seqs[b]; });
  std::vector<int> order;
  for (size_t lo = 0, hi = by_seq.size(); lo < hi;) {
    order.push_back(by_seq[--hi]);
    if (lo < hi) order.push_back(by_seq[lo++]);
  }
  return order;
}

uint64_t LowestPending(const std::vector<uint64_t>& seqs, const std::vector<bool>& finished) {
  uint64_t lowest = LastSequence() + 1;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (!finished[i]) lowest = std::min(lowest, seqs[i]);
  }
  return lowest;
}

TEST(Sequence, TheMarkIsTheLowestNumberPendingOnAnyThread) {
  constexpr int kThreads = 24;
  PendingThreads threads(kThreads);
  std::vector<bool> finished(kThreads, false);
  EXPECT_EQ(Mark(), LowestPending(threads.seqs(), finished));
  for (int i : AlternatingOrder(threads.seqs())) {
    threads.Finish(i);
    finished[i] = true;
    EXPECT_EQ(Mark(), LowestPending(threads.seqs(), finished)) << "after thread " << i << " finished";
  }
  EXPECT_EQ(SequenceOverflows(), 0u);
}

TEST(Sequence, MoreThreadsThanSlotsHoldTheMarkBackAndNeverPassIt) {
  constexpr int kThreads = 1100;  // the table has 1024 slots
  const uint64_t overflows_before = SequenceOverflows();
  PendingThreads threads(kThreads);
  EXPECT_EQ(SequenceOverflows() - overflows_before, uint64_t{kThreads - 1024});
  std::vector<bool> finished(kThreads, false);
  EXPECT_EQ(Mark(), LowestPending(threads.seqs(), finished));
  // Lowest first: the numbers that found no slot (the last taken) are the last pending, and must hold the mark.
  std::vector<int> order(kThreads);
  for (int i = 0; i < kThreads; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return threads.seqs()[a] < threads.seqs()[b]; });
  for (int i : order) {
    threads.Finish(i);
    finished[i] = true;
    ASSERT_LE(Mark(), LowestPending(threads.seqs(), finished)) << "after thread " << i << " finished";
  }
  EXPECT_EQ(Mark(), LastSequence() + 1);  // none pending: nothing holds it back any more
}

TEST(Sequence, AForkedChildForgetsTheParentsPendingNumbers) {
  PendingThreads threads(3);
  EXPECT_LT(Mark(), LastSequence() + 1);
  {
    std::lock_guard<std::mutex> hold(g_recorder_lock);
    ResetPendingAfterFork();  // as the child would (its other threads do not exist there)
  }
  EXPECT_EQ(Mark(), LastSequence() + 1);
  // The threads still finish here (they exist in this test): their numbers are no longer pending anywhere.
}

}  // namespace
}  // namespace cumemtrace::preload
