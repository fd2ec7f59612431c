// Not a test: measures how fast the analyzer reads and models a large synthetic trace (target: over 20 million
// events per second per core for reading + model).
// Usage: analyzer_benchmark [millions of events] [trace path] [reuse: read the trace left by an earlier run]
// [read|model: stop after that phase, and skip the component measurements; own-thread: after reading, only the
// summary with the layer on its own thread, five times, with each thread's CPU: what a profiler is pointed at]. With reuse the trace may be any trace
// (a real one): the lines that read it count the events the reader delivered, not the first argument, which then
// sizes only the components measured alone.
// The trace mimics a training run: alloc/free pairs over a live set of ~20k allocations, 8 threads, 200 stacks,
// a little out-of-order writing between threads.
#include <dirent.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "analyzer/model/analysis.h"
#include "analyzer/model/memory/memory_model.h"
#include "analyzer/model/torch/allocator_layer.h"
#include "analyzer/reader/reorder_window.h"
#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {
namespace {

class NullVisitor : public TraceVisitor {
 public:
  void OnEvent(const Event& e) override { sum_ += e.size; }
  uint64_t sum_ = 0;
};

class ModelVisitor : public TraceVisitor {
 public:
  void OnEvent(const Event& e) override { model_.Apply(e); }
  void OnEvents(absl::Span<const Event> events) override {
    model_.ApplyAll(events, [](const Event&, const Outcome&, uint64_t) {});
  }
  MemoryModel model_;
};

// Keeps the PyTorch allocator's events (TORCH_*), in the order the reader hands them over.
class TorchEventsVisitor : public TraceVisitor {
 public:
  void OnEvent(const Event& e) override { Keep(e); }
  void OnEvents(absl::Span<const Event> events) override {
    for (const Event& e : events) Keep(e);
  }
  std::vector<Event> events;

 private:
  void Keep(const Event& e) {
    if (e.info != nullptr && format::IsTorchApi(e.api)) events.push_back(e);
  }
};

double Seconds(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
// CPU time of this thread, for the parts that run on it alone: the machine may be shared, and wall time would
// measure the neighbours.
double CpuSeconds() { return Seconds(CLOCK_THREAD_CPUTIME_ID); }

// CPU seconds each thread of the process spends while the sampler runs, by thread name: it reads
// /proc/self/task/*/stat every 5 ms and keeps each thread's first and last reading (a thread that ends is counted up
// to 5 ms short; the kernel counts in ticks of 10 ms). It tells which thread sets the wall time on a machine with
// cores to spare.
class ThreadCpuSampler {
 public:
  ThreadCpuSampler() : thread_([this] { Loop(); }) {}
  ~ThreadCpuSampler() { Stop(); }
  // Stops sampling; returns the CPU seconds of each thread name (threads of one name summed), the sampler's own left
  // out.
  std::map<std::string, double> Stop() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
    }
    std::map<std::string, double> by_name;
    for (const auto& [tid, reading] : readings_) by_name[reading.name] += reading.last - reading.first;
    return by_name;
  }

 private:
  void Loop() {
    pthread_setname_np(pthread_self(), "cpu-sampler");
    const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
    while (!stop_) {
      DIR* dir = opendir("/proc/self/task");
      for (dirent* e = dir != nullptr ? readdir(dir) : nullptr; e != nullptr; e = readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/stat");
        std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const size_t open = stat.find('('), close = stat.rfind(')');
        if (open == std::string::npos || close == std::string::npos) continue;
        const std::string name = stat.substr(open + 1, close - open - 1);
        if (name == "cpu-sampler") continue;
        std::istringstream fields(stat.substr(close + 2));  // state is field 3; utime and stime are 14 and 15
        std::string field;
        unsigned long long utime = 0, stime = 0;
        for (int i = 3; i <= 15 && fields >> field; ++i) {
          if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
          if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
        }
        const double seconds = static_cast<double>(utime + stime) * tick;
        auto it = readings_.try_emplace(std::atoi(e->d_name), Reading{name, seconds, seconds}).first;
        it->second.name = name;  // a thread names itself after it starts
        it->second.last = seconds;
      }
      if (dir != nullptr) closedir(dir);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  struct Reading {
    std::string name;
    double first;  // CPU seconds when the sampler first saw the thread
    double last;
  };
  std::atomic<bool> stop_{false};
  std::map<int, Reading> readings_;  // by thread id, the sampler's own left out
  std::thread thread_;
};

// ReadTrace calls its visitor on a second thread (reader/delivery.h): a read is timed by the wall clock (what a
// user waits) and by the CPU time of the whole process (every thread).
struct ReadTimer {
  double wall = Seconds(CLOCK_MONOTONIC);
  double cpu = Seconds(CLOCK_PROCESS_CPUTIME_ID);
  void Print(const char* what, uint64_t total) const {
    const double w = Seconds(CLOCK_MONOTONIC) - wall;
    const double c = Seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu;
    std::printf("%s %.2f s wall, %.1f M events/s; %.2f s cpu (every thread), %.1f M events/s per cpu-second\n", what,
                w, static_cast<double>(total) / w / 1e6, c, static_cast<double>(total) / c / 1e6);
  }
};

int Main(int argc, char** argv) {
  const uint64_t millions = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20;
  const std::string path = argc > 2 ? argv[2] : "/tmp/cumem_benchmark.pb";
  const uint64_t total = millions * 1'000'000;
  std::mt19937_64 rng(7);
  const bool reuse = argc > 3 && std::string(argv[3]) == "reuse";
  if (!reuse) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    TraceBuilder head;
    head.Header();
    std::fwrite(head.bytes().data(), 1, head.size(), f);
    std::vector<uint64_t> live;
    uint64_t seq = 1;
    int64_t t = kStartNs;
    uint64_t next_address = 0x7f00'0000'0000ull;
    while (seq <= total) {
      std::vector<Ev> batch;
      const uint32_t thread = static_cast<uint32_t>(rng() % 8);
      for (int i = 0; i < 4096 && seq <= total; ++i) {
        Ev e;
        e.seq = seq++;
        t += static_cast<int64_t>(rng() % 2000);
        e.time_ns = t;
        e.thread = thread;
        e.stack = 1 + rng() % 200;
        if (live.size() < 20000 && (live.size() < 100 || rng() % 2 == 0)) {
          e.api = rng() % 10 == 0 ? format::Api::kCudaMallocAsync : format::Api::kCuMemAlloc;
          e.address = next_address;
          next_address += 4096 * (1 + rng() % 64);
          e.size = 512 * (1 + rng() % 8192);
          live.push_back(e.address);
        } else {
          const size_t k = rng() % live.size();
          e.api = format::Api::kCuMemFree;
          e.address = live[k];
          live[k] = live.back();
          live.pop_back();
        }
        batch.push_back(e);
      }
      // Swap two neighbours now and then: threads write slightly out of order.
      if (batch.size() > 2 && rng() % 4 == 0) std::swap(batch[0], batch[1]);
      const std::string bytes = TraceBuilder().Events(batch).bytes();
      std::fwrite(bytes.data(), 1, bytes.size(), f);
    }
    std::fclose(f);
  }
  if (!reuse) std::printf("trace: %s, %llu events\n", path.c_str(), static_cast<unsigned long long>(total));

  const std::string only = argc > 4 ? argv[4] : "";
  if (only != "read" && only != "model" && only != "own-thread") {
    // Components alone: the reorder window with events in order, and the live set's insert/remove pattern.
    NullVisitor sink;
    ReorderWindow window;
    Event e;
    e.info = format::FindApi(static_cast<uint32_t>(format::Api::kCudaMalloc));
    double t0 = CpuSeconds();
    for (uint64_t i = 0; i < total; ++i) {
      e.seq = i;
      e.size = i;
      window.Push(e, sink);
    }
    window.Drain(sink);
    double s = CpuSeconds() - t0;
    std::printf("window alone:        %.2f s cpu, %.1f M events/s\n", s, total / s / 1e6);
    // The live set alone, on a precomputed insert/remove pattern (20k live at most), without and with prefetching.
    std::vector<std::pair<bool, uint64_t>> ops;
    {
      std::vector<uint64_t> addresses;
      std::mt19937_64 r(3);
      uint64_t next = 0x7f00'0000'0000ull;
      for (uint64_t i = 0; i < total; ++i) {
        if (addresses.size() < 20000 && (addresses.size() < 100 || (r() & 1))) {
          addresses.push_back(next);
          ops.push_back({true, next});
          next += 4096 * (1 + (r() & 63));
        } else {
          const size_t k = r() % addresses.size();
          ops.push_back({false, addresses[k]});
          addresses[k] = addresses.back();
          addresses.pop_back();
        }
      }
    }
    for (int prefetch = 0; prefetch < 2; ++prefetch) {
      LiveSet live;
      Allocation a;
      a.kind = format::Kind::kDevice;
      Allocation old;
      t0 = CpuSeconds();
      for (size_t i = 0; i < ops.size(); ++i) {
        if (prefetch && i + 8 < ops.size()) live.Prefetch(format::Space::kAllocation, ops[i + 8].second);
        if (ops[i].first) {
          live.Insert(ops[i].second, a, &old);
        } else {
          live.Remove(format::Space::kAllocation, ops[i].second, &old);
        }
      }
      s = CpuSeconds() - t0;
      std::printf("live set alone%s: %.2f s cpu, %.1f M ops/s\n", prefetch ? " (prefetch)" : "           ", s,
                  total / s / 1e6);
    }
    // The model alone over in-memory events (the same pattern), in chunks as the reader hands them over.
    {
      std::vector<Event> events(ops.size());
      for (size_t i = 0; i < ops.size(); ++i) {
        Event& ev = events[i];
        ev.seq = i;
        ev.time_ns = static_cast<int64_t>(i) * 100;
        ev.api = ops[i].first ? format::Api::kCuMemAlloc : format::Api::kCuMemFree;
        ev.info = format::FindApi(static_cast<uint32_t>(ev.api));
        ev.address = ops[i].second;
        ev.size = 4096;
        ev.stack = 1 + i % 200;
      }
      MemoryModel model;
      t0 = CpuSeconds();
      for (size_t i = 0; i < events.size(); i += 256) {
        model.ApplyAll(absl::Span<const Event>(events).subspan(i, 256), [](const Event&, const Outcome&, uint64_t) {});
      }
      s = CpuSeconds() - t0;
      std::printf("model alone:         %.2f s cpu, %.1f M events/s\n", s, total / s / 1e6);
    }
  }
  ReadTimer timer;
  NullVisitor null;
  ReadStats stats;
  if (absl::Status read = ReadTrace(path, null, &stats); !read.ok()) {
    std::fprintf(stderr, "analyzer_benchmark: %s\n", std::string(read.message()).c_str());  // names the file
    return 1;
  }
  // What the reads below are divided by: the events in the file, whoever wrote it.
  const uint64_t read_events = stats.events;
  if (read_events == 0) {
    std::fprintf(stderr, "analyzer_benchmark: %s holds no events\n", path.c_str());
    return 1;
  }
  if (reuse) std::printf("trace: %s, %llu events\n", path.c_str(), static_cast<unsigned long long>(read_events));
  timer.Print("read only:          ", read_events);
  std::printf("                     %.2f bytes/event\n",
              static_cast<double>(stats.bytes) / static_cast<double>(read_events));

  if (only == "read") return 0;
  if (only == "own-thread") {
    for (int round = 0; round < 5; ++round) {
      AnalyzeOptions options;
      options.layer_thread = LayerThreading::kOwnThread;
      timer = ReadTimer();
      ThreadCpuSampler sampler;
      if (!Analyze(path, options).ok()) return 1;
      timer.Print("the layer on its own thread:", read_events);
      std::printf("    CPU by thread:");
      for (const auto& [name, seconds] : sampler.Stop()) std::printf(" %s %.2f s", name.c_str(), seconds);
      std::printf("\n");
    }
    return 0;
  }
  timer = ReadTimer();
  ModelVisitor model;
  if (!ReadTrace(path, model, &stats).ok()) return 1;
  timer.Print("read + model:       ", read_events);
  std::printf("                     live at end: %zu\n", model.model_.live().size());

  if (only == "model") return 0;
  timer = ReadTimer();
  absl::StatusOr<std::unique_ptr<Analysis>> a = Analyze(path, AnalyzeOptions());
  if (!a.ok()) return 1;
  timer.Print("full analysis (summary: one pass):", read_events);
  // PyTorch's allocator layer on the model's thread and on its own (AnalyzeOptions::layer_thread; the default picks
  // by the machine's cores).
  for (const auto& [threading, what] : {std::pair{LayerThreading::kInline, "  the layer on the model's thread:"},
                                        std::pair{LayerThreading::kOwnThread, "  the layer on its own thread:    "},
                                        std::pair{LayerThreading::kShared, "  the layer shared with reader:   "}}) {
    AnalyzeOptions options;
    options.layer_thread = threading;
    timer = ReadTimer();
    ThreadCpuSampler sampler;
    if (!Analyze(path, options).ok()) return 1;
    timer.Print(what, read_events);
    std::printf("    CPU by thread:");
    for (const auto& [name, seconds] : sampler.Stop()) std::printf(" %s %.2f s", name.c_str(), seconds);
    std::printf("\n");
  }
  // PyTorch's allocator layer alone, replaying the trace's PyTorch events from memory (the layer's own cost, which
  // the summary's threads hide): the best of three replays.
  TorchEventsVisitor torch;
  if (!ReadTrace(path, torch, &stats).ok()) return 1;
  if (!torch.events.empty()) {
    double best = 0;
    for (int round = 0; round < 3; ++round) {
      AllocatorLayer layer;
      const double t0 = CpuSeconds();
      for (size_t i = 0; i < torch.events.size(); ++i) layer.Apply(torch.events[i], i);
      const double seconds = CpuSeconds() - t0;
      best = round == 0 ? seconds : std::min(best, seconds);
    }
    std::printf("PyTorch's allocator layer alone: %.3f s cpu for %zu PyTorch events, %.1f ns per event\n", best,
                torch.events.size(), best * 1e9 / static_cast<double>(torch.events.size()));
  }
  return 0;
}

}  // namespace
}  // namespace cumemtrace::analyzer::test

int main(int argc, char** argv) { return cumemtrace::analyzer::test::Main(argc, argv); }
