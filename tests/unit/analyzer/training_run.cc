// WriteTrainingRun: see training_run.h.
#include "tests/unit/analyzer/training_run.h"

#include <vector>

#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {

std::string WriteTrainingRun(const std::string& name, bool leak) {
  // B's libraries load elsewhere and its checkout lives elsewhere: nothing but symbols may match.
  const uint64_t cudart = leak ? 0x20100 : 0x10100;
  const uint64_t cudart_base = cudart & ~uint64_t{0xfff};
  const std::string dir = leak ? "/data/v/checkout" : "/home/u/proj";
  TraceBuilder b;
  format::Header h = TraceBuilder::DefaultHeader();
  h.set_executable("/usr/bin/python3.12");
  h.set_python_frames_enabled(true);
  b.Header(h)
      .Device(0, "NVIDIA H200", 150'000'000'000)
      .Thread(0, 100, "python")
      .Module(1, "/usr/lib/x86_64-linux-gnu/libcudart.so.13", cudart_base, cudart_base, cudart_base + 0x10000)
      .Strings(1, {"train_step", dir + "/train.py", "keep_loss", "load_model", dir + "/model.py", "cudaMalloc",
                   "<module>"})
      // 1 train_step:10  2 keep_loss:42  3 load_model:5  4 <module>:99
      .PythonFrames(1, {1, 3, 4, 7}, {2, 2, 5, 2}, {10, 42, 5, 99});
  // B interns its stacks in another order, so its stack ids differ.
  uint64_t step = 0, keep = 0, model = 0;
  if (leak) {
    keep = b.Stack({cudart, PyPc(2), PyPc(4)});
    step = b.Stack({cudart, PyPc(1), PyPc(4)});
    model = b.Stack({cudart, PyPc(3), PyPc(4)});
  } else {
    model = b.Stack({cudart, PyPc(3), PyPc(4)});
    step = b.Stack({cudart, PyPc(1), PyPc(4)});
    keep = b.Stack({cudart, PyPc(2), PyPc(4)});
  }
  const uint64_t base = leak ? 0x7f0000000000 : 0x100000;
  std::vector<Ev> events;
  uint64_t seq = 1;
  events.push_back(Alloc(seq++, 1, base, leak ? 900 : 1000, model));
  for (int i = 0; i < 10; ++i) {
    const double t = 10.0 * (i + 1);
    events.push_back(Alloc(seq++, t, base + 0x1000, 500, step));
    if (leak) events.push_back(Alloc(seq++, t + 1, base + 0x10000 + 0x100 * i, 100, keep));
    events.push_back(Free(seq++, t + 2, base + 0x1000));
  }
  b.Events(events)
      .SymbolsWithLines({cudart}, {6}, {1}, {0x100}, {0}, {0})
      .Trailer(seq - 1, kStartNs + 200'000'000);
  return b.Write(name);
}

}  // namespace cumemtrace::analyzer::test
