// End-to-end test program (q): PyTorch's caching allocator as the fake libc10_cuda.so plays it. The allocator's
// own driver allocations are where the preload attaches its trace tracker; the fake writes a ledger of every trace
// entry it emits (FAKE_TORCH_LEDGER), which the tests compare with the trace. Scenario in argv[1]:
//   basic   blocks in small and large segments (one under the fake's no_grad), frees, an emptied cache, one block
//           live at exit
//   retry   a driver allocation from the library before its allocator exists, then basic
//   oom     a request the driver refuses (FAKE_CUDA_FAIL_ABOVE): the allocator's OOM entry
//   devices two device allocators
//   deferred frees that wait for other streams (record_stream): completed after another row, right after the
//            request, and on another thread; then basic
//   held     a deferred free completed while another thread's cuMemFree is in flight (its sequence number taken,
//            its row not yet written; the fake driver's free gate holds it there); then basic
//   signals  blocks allocated and freed while another thread keeps signalling this one, whose handler allocates
//            and frees 4 KiB with the driver, until kMinHandled signals were handled; nothing else
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include <atomic>
#include <thread>

#include "fake_cuda_control.h"
#include "program_support.h"

extern "C" {
void fake_torch_init(int device_count);
void* fake_torch_malloc(size_t size, int device);
void fake_torch_free(void* ptr);
void fake_torch_empty_cache();
void fake_torch_set_grad_enabled(int enabled);  // fake libc10.so
void fake_torch_record_stream(void* ptr);
void fake_torch_process_events();
CUdeviceptr fake_torch_raw_alloc(size_t size);
}

namespace {

using cumemtrace::e2e::kKiB;
using cumemtrace::e2e::kMiB;

void Basic(int device) {
  void* a = fake_torch_malloc(1000, device);
  void* b = fake_torch_malloc(3 * kMiB, device);
  fake_torch_set_grad_enabled(0);  // as under torch.no_grad()
  void* c = fake_torch_malloc(100, device);
  fake_torch_set_grad_enabled(1);
  E2E_CHECK(a != nullptr && b != nullptr && c != nullptr);
  fake_torch_free(a);
  void* d = fake_torch_malloc(512, device);
  E2E_CHECK(d != nullptr);
  fake_torch_free(b);
  fake_torch_free(c);
  fake_torch_free(d);
  fake_torch_empty_cache();
  E2E_CHECK(fake_torch_malloc(64 * kKiB, device) != nullptr);  // live at exit: a tensor never freed
}

// Each free's completion is a row of its own unless it comes right after its request, on the same thread.
void DeferredFrees() {
  void* a = fake_torch_malloc(1000, 0);
  fake_torch_record_stream(a);
  fake_torch_free(a);
  void* b = fake_torch_malloc(2000, 0);  // a row between a's request and its completion
  fake_torch_process_events();
  void* c = fake_torch_malloc(3000, 0);
  fake_torch_record_stream(c);
  fake_torch_free(c);
  fake_torch_process_events();  // right after the request: one torch.free row
  // Completed by another thread, one that has rows of its own already.
  std::atomic<int> step{0};
  std::thread other([&step] {
    void* e = fake_torch_malloc(500, 0);
    step.store(1);
    while (step.load() != 2) std::this_thread::yield();
    fake_torch_process_events();
    fake_torch_free(e);
  });
  while (step.load() != 1) std::this_thread::yield();
  void* d = fake_torch_malloc(4000, 0);
  fake_torch_record_stream(d);
  fake_torch_free(d);
  step.store(2);
  other.join();
  E2E_CHECK(a != nullptr && b != nullptr && c != nullptr && d != nullptr);
  fake_torch_free(b);
}

// The request's row is the last one written when the other thread takes its number; the completion comes after.
void CompletionWhileAFreeIsInFlight() {
  CUdeviceptr p = 0;
  E2E_CHECK_CU(cuMemAlloc(&p, 4096));
  void* c = fake_torch_malloc(3000, 0);
  E2E_CHECK(c != nullptr);
  fake_torch_record_stream(c);
  fake_torch_free(c);  // the request
  FakeCudaCloseFreeGate(1);
  std::thread other([p] { E2E_CHECK_CU(cuMemFree(p)); });
  while (FakeCudaFreeGateWaiters() == 0) std::this_thread::yield();  // its number is taken, its row not written
  fake_torch_process_events();  // the completion
  FakeCudaCloseFreeGate(0);
  other.join();
}

// A handler's CUDA call may come while the thread holds the recorder's lock (recording an entry of the allocator,
// or folding a completed free into its request): it must not wait for that lock. The blocks are reused from the
// first segment, so the loop itself never calls the driver (the fake driver's own mutex is not the subject) and never
// the heap (the handler's fake driver allocates: only safe while the interrupted code is not inside malloc). Each
// signal is sent once the one before was handled, after a random pause, so that signals fall at random points of
// the loop rather than piling up behind a handler; the loop runs until kMinHandled were handled (a busy machine
// schedules the sender less often), kMaxSeconds at most. Run without FAKE_TORCH_LEDGER (FAKE_TORCH_COUNTS counts
// instead): a write(2) per entry would keep the thread in the kernel most of the time, and a signal that comes then
// is taken on the way out of the write, never inside the recorder.
constexpr int kMinBlocks = 20000;
constexpr int kMinHandled = 1000;
constexpr int kMaxSeconds = 30;
constexpr uint32_t kMaxSpinsBetweenSignals = 4096;
std::atomic<int> g_handled{0};

void AllocateInHandler(int) {
  const int saved_errno = errno;
  CUdeviceptr p = 0;
  if (cuMemAlloc(&p, 4096) == CUDA_SUCCESS) cuMemFree(p);
  g_handled.fetch_add(1, std::memory_order_relaxed);
  errno = saved_errno;
}

void BlocksWhileSignalled() {
  struct sigaction action = {};
  action.sa_handler = AllocateInHandler;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  E2E_CHECK(sigaction(SIGUSR1, &action, nullptr) == 0);
  fake_torch_free(fake_torch_malloc(1000, 0));  // the segment, before any signal
  std::atomic<bool> stop{false};
  const pthread_t target = pthread_self();
  std::thread sender([&stop, target] {
    uint32_t random = 2463534242u;
    while (!stop.load(std::memory_order_relaxed)) {
      const int handled = g_handled.load(std::memory_order_relaxed);
      pthread_kill(target, SIGUSR1);
      while (g_handled.load(std::memory_order_relaxed) == handled && !stop.load(std::memory_order_relaxed)) {
      }
      random ^= random << 13;  // xorshift32
      random ^= random >> 17;
      random ^= random << 5;
      for (uint32_t spin = random % kMaxSpinsBetweenSignals; spin > 0; --spin) asm volatile("" ::: "memory");
    }
  });
  const time_t deadline = time(nullptr) + kMaxSeconds;
  for (int i = 0;; ++i) {
    if (i >= kMinBlocks && i % 1024 == 0 &&
        (g_handled.load(std::memory_order_relaxed) >= kMinHandled || time(nullptr) > deadline)) {
      break;
    }
    void* block = fake_torch_malloc(1000, 0);
    E2E_CHECK(block != nullptr);
    fake_torch_free(block);
  }
  stop.store(true);
  sender.join();
}

}  // namespace

int main(int argc, char** argv) {
  const char* scenario = argc > 1 ? argv[1] : "basic";
  E2E_CHECK_CU(cuInit(0));
  if (strcmp(scenario, "retry") == 0) E2E_CHECK(fake_torch_raw_alloc(kMiB) != 0);
  fake_torch_init(strcmp(scenario, "devices") == 0 ? 2 : 1);
  if (strcmp(scenario, "deferred") == 0) DeferredFrees();
  if (strcmp(scenario, "held") == 0) CompletionWhileAFreeIsInFlight();
  if (strcmp(scenario, "signals") == 0) {
    BlocksWhileSignalled();
    return 0;
  }
  Basic(0);
  if (strcmp(scenario, "devices") == 0) Basic(1);
  if (strcmp(scenario, "oom") == 0) E2E_CHECK(fake_torch_malloc(cumemtrace::e2e::kPlantedFailureBytes, 0) == nullptr);
  return 0;
}
