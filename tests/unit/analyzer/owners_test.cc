// Owner attribution: the module rules one by one, and Analyze() on a trace whose stacks pass through named
// libraries, against owner bytes worked out by hand in the comment of OwnersTrace().
#include "analyzer/model/usage/owners.h"

#include <map>
#include <string>

#include "analyzer/model/analysis.h"
#include "gtest/gtest.h"
#include "tests/unit/analyzer/trace_builder.h"

namespace cumemtrace::analyzer::test {
namespace {

using format::Api;

constexpr char kExe[] = "/srv/app/trainer";

std::string SlugOf(const std::string& path) {
  const ModuleClass c = ClassifyModule(path, kExe);
  return c.plumbing ? (c.cuda ? "<cuda plumbing>" : "<plumbing>") : c.owner.slug;
}

TEST(ClassifyModule, KnownLibrariesAndPlumbing) {
  const std::map<std::string, std::string> expected = {
      {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "<cuda plumbing>"},
      {"/usr/lib/x86_64-linux-gnu/libcuda.so", "<cuda plumbing>"},
      {"/usr/local/cuda/lib64/libcudart.so.13", "<cuda plumbing>"},
      {"/opt/cumemtrace/lib/libcumemtrace.so", "<plumbing>"},
      {"/lib/x86_64-linux-gnu/libc.so.6", "<plumbing>"},
      {"/lib/x86_64-linux-gnu/libpthread.so.0", "<plumbing>"},
      {"/lib64/ld-linux-x86-64.so.2", "<plumbing>"},
      {"/venv/site-packages/torch/lib/libc10_cuda.so", "pytorch"},
      {"/venv/site-packages/torch/lib/libc10.so", "c10"},
      {"/venv/site-packages/torch/lib/libtorch_cuda.so", "torch_cuda"},
      {"/venv/site-packages/nvidia/cublas/lib/libcublas.so.13", "cublas"},
      {"/venv/site-packages/nvidia/cublas/lib/libcublasLt.so.13", "cublaslt"},
      {"/venv/site-packages/nvidia/cudnn/lib/libcudnn.so.9", "cudnn"},
      {"/venv/site-packages/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9", "cudnn"},
      {"/venv/site-packages/nvidia/nccl/lib/libnccl.so.2", "nccl"},
      {"/venv/site-packages/cupy/_core/core.cpython-311-x86_64-linux-gnu.so", "cupy"},
      {"/venv/site-packages/cupy_backends/cuda/api/runtime.cpython-311-x86_64-linux-gnu.so", "cupy"},
      {"/venv/site-packages/jaxlib/xla_extension.so", "xla"},
      {"/venv/site-packages/jaxlib/mlir/_mlir_libs/libjaxlib_mlir_capi.so", "xla"},
      {"/venv/site-packages/jax_plugins/xla_cuda12/xla_cuda_plugin.so", "xla"},
      {"/opt/xla/libxla_gpu.so", "xla"},
      {kExe, "program"},
      {"/srv/app/libtrainer_kernels.so.1.2", "trainer_kernels"},
      {"/venv/site-packages/torch/_C.cpython-311-x86_64-linux-gnu.so", "_C.cpython-311-x86_64-linux-gnu"},
      {"/usr/lib/libcudadebugger.so.1", "cudadebugger"},  // not libcuda
      {"/usr/lib/libcuda_extra.so", "cuda_extra"},         // not libcuda either
  };
  for (const auto& [path, slug] : expected) EXPECT_EQ(SlugOf(path), slug) << path;
  EXPECT_EQ(ClassifyModule(kExe, kExe).owner.display_name, "program (trainer)");
  EXPECT_EQ(ClassifyModule("/x/libnccl.so.2", kExe).owner.display_name, "NCCL");
  EXPECT_EQ(ClassifyModule("/x/libfoo.so.3", kExe).owner.display_name, "libfoo.so.3");
}

// Module ids of OwnersTrace().
enum : uint32_t {
  kCatchAll = 1, kCuda, kCudart, kC10Cuda, kCublasLt, kCublas, kNccl, kCupy, kLibc, kProgram, kMyStuff, kTool
};

// Stacks (innermost first) and their owners:
//   A  tool, <Python frame>, libcuda, libcudart, libc10_cuda, program   -> pytorch (the Python frame is skipped:
//      otherwise it would fall in the catch-all module announced first, "everything")
//   B  libcuda, libcublasLt, libcublas, libc10_cuda                     -> cublaslt
//   C  libcudart, libcublas, libc10_cuda                                -> cublas
//   D  libcuda, libnccl, libc10_cuda                                    -> nccl
//   E  libcuda, cupy_backends/.../runtime.so                            -> cupy
//   F  libcudart, libc, program                                         -> program
//   G  libcuda, libcudart                                               -> cuda
//   I  libmystuff                                                       -> mystuff
//   0  (no stack)                                                       -> unknown
//
// Events (device 0 unless said; columns are live bytes after the event):
//   seq  event                                      pytorch cublaslt cublas nccl cupy cuda | dev0 total
//   1    cudaMalloc        0x1000 1000  A           1000                                   | 1000 peak
//   2    cudaMalloc        0x2000  300  B                    300                           | 1300 peak
//   3    cudaFree          0x2000                            0                             | 1000
//   4    cudaMalloc        0x3000  200  C                           200                    | 1200
//   5    cudaMallocAsync   0x4000  500  D (pool)                         500               | 1700 peak
//   6    cudaFree          0x1000                   0                                      | 700
//   7    cudaMallocManaged 0x5000  400  E                                    400           | 1100
//   8    cudaMalloc        0x6000  100  A           100                                    | 1200
//   9    cuMemCreate       handle 0x7000 50 G (vmm_physical)                      50       | 1250
//   10   cuMemAddressReserve 0x8000 1 GiB, no stack (address space: no owner counts it)
//   11   cudaMalloc        0x9000  800  B                    800                           | 2050 = PEAK
//   12   cudaFree          0x9000                            0                             | 1250
//   13   cudaFree          0x6000                   0                                      | 1150
//   14   device 1: cudaMalloc 0x10000 700 F (program 700)                                  | dev1 700
//   15   device 1: cudaMalloc 0x11000 300 I (mystuff 300)                                  | dev1 1000 = peak
//   16   device 1: cudaFree   0x10000 (program 0)                                          | dev1 300
//   17   host: cudaHostAlloc 0x20000 4096 A (pytorch on host)                               host 4096
//   18   cudaHostRegister 0x21000 8192 no stack, recorded on device 0 (host memory: device -1) host 12288 peak
//   19   cudaMalloc        0x3000   60  D: replaces C's live 200 (an overwrite)    0    560 | 1010
//   20   cudaMalloc        2^40 B: fails (nothing changes)
//
// Device 0 at its peak (seq 11): pytorch 100, cublaslt 800, cublas 200, nccl 500, cupy 400, cuda 50 (= 2050).
// Own peaks: pytorch 1000, cublaslt 800, nccl 560, cupy 400, cublas 200, cuda 50.
// At the end: pytorch 0, cublaslt 0, cublas 0, nccl 560, cupy 400, cuda 50 (= 1010).
TraceBuilder OwnersTrace(uint64_t* stacks /* A B C D E F G I */) {
  TraceBuilder b;
  b.Header(TraceBuilder::RankHeader(-1, -1, -1, 4242, "testhost", kExe));
  b.Device(0, "NVIDIA H200", 150'000'000'000).Device(1, "NVIDIA H200", 150'000'000'000);
  b.Module(kCatchAll, "/catch/libeverything.so", 0, 0, ~uint64_t{0});
  b.NamedModule(kCuda, "/usr/lib/x86_64-linux-gnu/libcuda.so.1")
      .NamedModule(kCudart, "/venv/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13")
      .NamedModule(kC10Cuda, "/venv/site-packages/torch/lib/libc10_cuda.so")
      .NamedModule(kCublasLt, "/venv/site-packages/nvidia/cublas/lib/libcublasLt.so.13")
      .NamedModule(kCublas, "/venv/site-packages/nvidia/cublas/lib/libcublas.so.13")
      .NamedModule(kNccl, "/venv/site-packages/nvidia/nccl/lib/libnccl.so.2")
      .NamedModule(kCupy, "/venv/site-packages/cupy_backends/cuda/api/runtime.cpython-311-x86_64-linux-gnu.so")
      .NamedModule(kLibc, "/lib/x86_64-linux-gnu/libc.so.6")
      .NamedModule(kProgram, kExe)
      .NamedModule(kMyStuff, "/opt/lib/libmystuff.so.1.2")
      .NamedModule(kTool, "/opt/cumemtrace/lib/libcumemtrace.so");
  auto pc = [](uint32_t m) { return TraceBuilder::PcIn(m); };
  b.Stack(1, {pc(kTool), format::PcOfPythonFrameId(3), pc(kCuda), pc(kCudart), pc(kC10Cuda), pc(kProgram)},
          &stacks[0]);
  b.Stack(10, {pc(kCuda), pc(kCublasLt), pc(kCublas), pc(kC10Cuda)}, &stacks[1]);
  b.Stack(20, {pc(kCudart), pc(kCublas), pc(kC10Cuda)}, &stacks[2]);
  b.Stack(30, {pc(kCuda), pc(kNccl), pc(kC10Cuda)}, &stacks[3]);
  b.Stack(40, {pc(kCuda), pc(kCupy)}, &stacks[4]);
  b.Stack(50, {pc(kCudart), pc(kLibc), pc(kProgram)}, &stacks[5]);
  b.Stack(60, {pc(kCuda), pc(kCudart)}, &stacks[6]);
  b.Stack(70, {pc(kMyStuff)}, &stacks[7]);
  const uint64_t A = stacks[0], B = stacks[1], C = stacks[2], D = stacks[3], E = stacks[4], F = stacks[5],
                 G = stacks[6], I = stacks[7];
  Ev fail = Alloc(20, 20, 0, uint64_t{1} << 40, B);
  fail.result = 2;
  b.Events({Alloc(1, 1, 0x1000, 1000, A), Alloc(2, 2, 0x2000, 300, B), Free(3, 3, 0x2000),
            Alloc(4, 4, 0x3000, 200, C), Alloc(5, 5, 0x4000, 500, D, Api::kCudaMallocAsync), Free(6, 6, 0x1000),
            Alloc(7, 7, 0x5000, 400, E, Api::kCudaMallocManaged), Alloc(8, 8, 0x6000, 100, A),
            Alloc(9, 9, 0x7000, 50, G, Api::kCuMemCreate), Alloc(10, 10, 0x8000, uint64_t{1} << 30, 0,
                                                                   Api::kCuMemAddressReserve),
            Alloc(11, 11, 0x9000, 800, B), Free(12, 12, 0x9000), Free(13, 13, 0x6000)});
  b.Events({Alloc(14, 14, 0x10000, 700, F, Api::kCudaMalloc, 1), Alloc(15, 15, 0x11000, 300, I, Api::kCudaMalloc, 1),
            Free(16, 16, 0x10000, Api::kCudaFree, 1), Alloc(17, 17, 0x20000, 4096, A, Api::kCudaHostAlloc, -1),
            Alloc(18, 18, 0x21000, 8192, 0, Api::kCudaHostRegister, 0), Alloc(19, 19, 0x3000, 60, D), fail});
  b.Trailer(20, kStartNs + 100'000'000);
  return b;
}

struct Expected {
  int32_t device;
  const char* owner;
  uint64_t allocations, bytes_allocated, peak, at_device_peak, at_end;
};

TEST(Owners, BytesPerOwnerAtOwnPeakDevicePeakAndEnd) {
  uint64_t stacks[8];
  absl::StatusOr<std::unique_ptr<Analysis>> result =
      Analyze(OwnersTrace(stacks).Write("owners.pb"), AnalyzeOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  const Analysis& a = **result;
  EXPECT_EQ(a.model.overwritten, 1u);
  const Expected expected[] = {
      // Host first (device -1), then each device by own peak.
      {-1, "unknown", 1, 8192, 8192, 8192, 8192},
      {-1, "pytorch", 1, 4096, 4096, 4096, 4096},
      {0, "pytorch", 2, 1100, 1000, 100, 0},
      {0, "cublaslt", 2, 1100, 800, 800, 0},
      {0, "nccl", 2, 560, 560, 500, 560},
      {0, "cupy", 1, 400, 400, 400, 400},
      {0, "cublas", 1, 200, 200, 200, 0},
      {0, "cuda", 1, 50, 50, 50, 50},
      {1, "program", 1, 700, 700, 700, 0},
      {1, "mystuff", 1, 300, 300, 300, 300},
  };
  ASSERT_EQ(a.owners.size(), std::size(expected));
  for (size_t i = 0; i < std::size(expected); ++i) {
    const OwnerUsage& o = a.owners[i];
    const Expected& e = expected[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(o.device, e.device);
    EXPECT_EQ(o.name.slug, e.owner);
    EXPECT_EQ(o.allocations, e.allocations);
    EXPECT_EQ(o.bytes_allocated, e.bytes_allocated);
    EXPECT_EQ(o.peak_bytes, e.peak);
    EXPECT_EQ(o.bytes_at_device_peak, e.at_device_peak);
    EXPECT_EQ(o.live_bytes_at_end, e.at_end);
  }
  EXPECT_EQ(a.owners[2].name.display_name, "PyTorch (caching allocator)");
  EXPECT_EQ(a.owners[8].name.display_name, "program (trainer)");

  // The oracle the owner split must agree with: the peak report's device totals.
  for (int32_t device : {0, 1}) {
    const PeakResult* total = a.FindPeak(device, kDeviceTotalSeries);
    ASSERT_NE(total, nullptr);
    uint64_t at_peak = 0, at_end = 0;
    for (const OwnerUsage& o : a.owners) {
      if (o.device != device) continue;
      at_peak += o.bytes_at_device_peak;
      at_end += o.live_bytes_at_end;
    }
    EXPECT_EQ(at_peak, total->counter.peak_bytes) << device;
    EXPECT_EQ(at_end, total->counter.bytes) << device;
  }
  EXPECT_EQ(a.FindPeak(0, kDeviceTotalSeries)->counter.peak_bytes, 2050u);
}

TEST(Owners, CachedPerStack) {
  StackTable stacks;
  SymbolTable symbols;
  const std::string exe = kExe;
  symbols.AddModule(ModuleInfo{1, "/x/libnccl.so.2", 0x1000, 0x1000, 0x2000, ""});
  stacks.Add(StackNode{1, 0, 0x1100});
  OwnerTracker tracker(stacks, symbols, exe);
  const uint32_t nccl = tracker.OwnerOf(1);
  EXPECT_EQ(tracker.Name(nccl).slug, "nccl");
  // A module announced later over the same range does not change an owner already found for that stack.
  symbols.AddModule(ModuleInfo{2, "/x/libother.so", 0x1000, 0x1000, 0x2000, ""});
  EXPECT_EQ(tracker.OwnerOf(1), nccl);
  EXPECT_EQ(tracker.Name(tracker.OwnerOf(0)).slug, "unknown");
}

}  // namespace
}  // namespace cumemtrace::analyzer::test
