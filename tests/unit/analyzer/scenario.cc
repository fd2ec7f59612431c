// The scenario (times in ms after the start; device 0 unless said; "s2"/"s3" are stack ids):
//
//   seq  t    thread       event                                   device 0: device  pool  total   host pinned
//   1    1    python       cudaMalloc      0x1000  100  s2                   100             100
//   2    2    python       cudaMalloc      0x2000  200  s3                   300             300
//   3    3    python       cudaMalloc      0x3000  300  s2                   600             600
//   4    4    pt_data_pin  cudaFree        0x1000                            500             500
//   5    5    python       cudaMalloc      0x1000  150  s3 (reuse)           650 = peak      650
//   6    6    python       cudaFree        0x3000                            350             350
//   7    7    python       cudaMallocAsync 0x5000  1000 s2                   350  1000 pk    1350 = peak
//   8    8    python       cudaFreeAsync   0x5000                            350  0          350
//   9    9    python       cudaMalloc      2^40 FAILS: OUT_OF_MEMORY, free 1000 of 5000, s2
//   10   10   pt_data_pin  cudaHostAlloc   0xA000  4096 s3 (device -1)                                 4096
//   11   10.5 pt_data_pin  cudaHostAlloc   0xB000  8192 s3 (device -1)                                 12288 = peak
//   12   20   pt_data_pin  cudaFreeHost    0xA000                                                      8192
//   13   30   python       cuMemAddressReserve 0x7000'0000 1 GiB (address space, never memory)
//
// Seq 4 (the free of 0x1000) reaches the file after seq 5 (the reuse of 0x1000), in a later batch: only seq order
// pairs them right. The trailer ends the trace at 100 ms.
//
// Peaks: device 650 at 5 ms (live: s3 200+150 in 2, s2 300 in 1); pool 1000 at 7 ms (s2); device total 1350 at
// 7 ms (s2 1000, s3 350); pinned_host 12288 at 10.5 ms (s3, 2). Leaks: device 350 (s3, 2), pinned_host 8192 (s3),
// address_reserve 1 GiB. OOM: live 350 on device 0 (s3, 2). Pinned: 1 ms windows; window 10 rose 12288, by
// pt_data_pin s3.
//
// Stacks: node 1 = torch::train() (libtorch.so), node 2 = cudaMalloc (libcudart.so.13) under 1, node 3 = an
// unsymbolized pc in libtorch.so (+0x200) under 1.
#include "tests/unit/analyzer/scenario.h"

namespace cumemtrace::analyzer::test {

using format::Api;

TraceBuilder ScenarioTrace(bool with_trailer) {
  TraceBuilder b;
  b.Header()
      .Device(0, "NVIDIA H200", 150'000'000'000)
      .Thread(0, 1000, "python")
      .Thread(1, 1001, "pt_data_pin")
      .Module(1, "/usr/lib/libcudart.so.13", 0x10000, 0x10000, 0x20000)
      .Module(2, "/opt/torch/lib/libtorch.so", 0x40000, 0x40000, 0x50000)
      .StackNodes(1, {0, 1, 1}, {0x40100, 0x10010, 0x40200})
      .Events({Alloc(1, 1, 0x1000, 100, 2), Alloc(2, 2, 0x2000, 200, 3), Alloc(3, 3, 0x3000, 300, 2),
               Alloc(5, 5, 0x1000, 150, 3)});
  Ev oom = Alloc(9, 9, 0, uint64_t{1} << 40, 2);
  oom.result = 2;
  oom.has_mem_info = true;
  oom.free_bytes = 1000;
  oom.total_bytes = 5000;
  b.Events({Free(4, 4, 0x1000, Api::kCudaFree, 0, 1), Free(6, 6, 0x3000),
            Alloc(7, 7, 0x5000, 1000, 2, Api::kCudaMallocAsync), Free(8, 8, 0x5000, Api::kCudaFreeAsync), oom});
  b.Events({Alloc(10, 10, 0xA000, 4096, 3, Api::kCudaHostAlloc, -1, 1),
            Alloc(11, 10.5, 0xB000, 8192, 3, Api::kCudaHostAlloc, -1, 1),
            Free(12, 20, 0xA000, Api::kCudaFreeHost, -1, 1),
            Alloc(13, 30, 0x7000'0000, uint64_t{1} << 30, 1, Api::kCuMemAddressReserve)});
  if (with_trailer) {
    b.Strings(1, {"cudaMalloc", "_ZN5torch5trainEv"}).Symbols({0x10010, 0x40100}, {1, 2}, {1, 2}, {0x10, 0x0});
    b.Trailer(13, kStartNs + 100'000'000);
  }
  return b;
}

std::string WriteScenario(const std::string& name, bool with_trailer) {
  return ScenarioTrace(with_trailer).Write(name);
}

}  // namespace cumemtrace::analyzer::test
