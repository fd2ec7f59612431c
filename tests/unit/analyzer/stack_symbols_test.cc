// Stack table, symbol table, frame resolution, demangling and CUDA error names.
#include "analyzer/model/memory/cuda_errors.h"
#include "analyzer/model/stacks/demangle.h"
#include "analyzer/model/stacks/frame_resolver.h"
#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

TEST(StackTable, WalksInnermostFirst) {
  StackTable t;
  t.Add({1, 0, 0x100});
  t.Add({2, 1, 0x200});
  t.Add({3, 2, 0x300});
  t.Add({4, 1, 0x400});
  EXPECT_EQ(t.Pcs(3), (std::vector<uint64_t>{0x300, 0x200, 0x100}));
  EXPECT_EQ(t.Pcs(4), (std::vector<uint64_t>{0x400, 0x100}));
  EXPECT_EQ(t.Pcs(3, 2), (std::vector<uint64_t>{0x300, 0x200}));
  EXPECT_TRUE(t.Pcs(0).empty());
  EXPECT_TRUE(t.Pcs(99).empty());
  EXPECT_EQ(t.Depth(3), 3u);
  EXPECT_EQ(t.size(), 4u);
}

TEST(StackTable, SparseIdsAndCyclesAreSafe) {
  StackTable t;
  t.Add({5, 1000000, 0x5});
  t.Add({1000000, 5, 0x6});  // a cycle from a damaged file
  t.Add({1, 0, 0x1});
  EXPECT_EQ(t.Pcs(1), (std::vector<uint64_t>{0x1}));
  EXPECT_EQ(t.Pcs(5).size(), StackTable::kMaxDepth);
  EXPECT_EQ(t.Pcs(5)[1], 0x6u);
  t.Add({uint64_t{1} << 62, 0, 0x9});
  EXPECT_EQ(t.Pcs(uint64_t{1} << 62), (std::vector<uint64_t>{0x9}));
}

TEST(SymbolTable, StringsModulesSymbols) {
  SymbolTable s;
  s.AddString(1, "a");
  s.AddString(2, "b");
  s.AddString(100, "far");
  EXPECT_EQ(s.String(0), "");
  EXPECT_EQ(s.String(2), "b");
  EXPECT_EQ(s.String(100), "far");
  EXPECT_EQ(s.String(50), "");
  s.AddModule({1, "/lib/a.so", 0x1000, 0x2000, 0x3000, ""});
  s.AddModule({2, "/lib/b.so", 0x8000, 0x2000, 0x3000, ""});  // mapped later at the same place
  ASSERT_NE(s.ModuleContaining(0x2500), nullptr);
  EXPECT_EQ(s.ModuleContaining(0x2500)->path, "/lib/b.so");
  EXPECT_EQ(s.ModuleContaining(0x3000), nullptr);
  EXPECT_EQ(s.FindModule(1)->path, "/lib/a.so");
  s.AddModule({1, "/lib/a2.so", 0x1000, 0x2000, 0x3000, ""});
  EXPECT_EQ(s.FindModule(1)->path, "/lib/a2.so");
  EXPECT_EQ(s.module_count(), 2u);
}

TEST(Demangle, CxxNamesOnly) {
  EXPECT_EQ(Demangle("_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator6mallocEPPvimP11CUstream_st"),
            "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, int, unsigned long, "
            "CUstream_st*)");
  EXPECT_EQ(Demangle("_Z3foov.cold"), "foo() [clone .cold]");
  EXPECT_EQ(Demangle("cudaMalloc"), "cudaMalloc");
  EXPECT_EQ(Demangle("i"), "i");  // not "int"
  EXPECT_EQ(Demangle("_Z"), "_Z");
  EXPECT_EQ(Demangle("_Zgarbage!"), "_Zgarbage!");
  EXPECT_EQ(Demangle(std::string(100000, 'A').insert(0, "_Z")).size(), 100002u);
}

TEST(FrameResolver, SymbolModuleOrNothing) {
  StackTable stacks;
  stacks.Add({1, 0, 0x7000'1010});  // outer: in libtorch, no symbol
  stacks.Add({2, 1, 0x7100'0020});  // symbol in libcudart
  stacks.Add({3, 2, 0x9999});       // nowhere
  SymbolTable symbols;
  symbols.AddString(1, "_ZN2at6native5emptyEv");
  symbols.AddString(2, "cudaMalloc");
  symbols.AddString(3, "torch/nn/modules/module.py");
  symbols.AddModule({1, "/opt/torch/lib/libtorch_cuda.so", 0x7000'0000, 0x7000'1000, 0x7000'9000, ""});
  symbols.AddModule({2, "/usr/lib/libcudart.so.13", 0x7100'0000, 0x7100'0000, 0x7100'9000, ""});
  symbols.AddSymbol({0x7100'0020, 2, 2, 0x20, 0, 0});
  symbols.AddSymbol({0x7000'5000, 1, 1, 0, 3, 42});
  FrameResolver r(stacks, symbols);
  std::vector<Frame> f = r.ResolveStack(3, 10);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].function, "??");
  EXPECT_EQ(f[0].module, "");
  EXPECT_FALSE(f[0].offset.has_value());
  EXPECT_EQ(FrameLocation(f[0]), "0x9999");
  EXPECT_EQ(f[1].function, "cudaMalloc");
  EXPECT_EQ(f[1].module, "/usr/lib/libcudart.so.13");
  EXPECT_EQ(f[2].function, "??");
  EXPECT_EQ(f[2].module, "/opt/torch/lib/libtorch_cuda.so");
  EXPECT_EQ(*f[2].offset, 0x1010u);
  EXPECT_EQ(FrameLocation(f[2]), "libtorch_cuda.so+0x1010");
  const Frame& with_line = r.ResolvePc(0x7000'5000);
  EXPECT_EQ(with_line.function, "at::native::empty()");
  EXPECT_EQ(with_line.file, "torch/nn/modules/module.py");
  EXPECT_EQ(with_line.line, 42u);
  EXPECT_EQ(r.ResolveStack(3, 1).size(), 1u);
}

TEST(CudaErrors, Names) {
  EXPECT_STREQ(CudaErrorName(0), "CUDA_SUCCESS");
  EXPECT_STREQ(CudaErrorName(1), "CUDA_ERROR_INVALID_VALUE");
  EXPECT_STREQ(CudaErrorName(2), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_STREQ(CudaErrorName(3), "CUDA_ERROR_NOT_INITIALIZED");
  EXPECT_STREQ(CudaErrorName(100), "CUDA_ERROR_NO_DEVICE");
  EXPECT_STREQ(CudaErrorName(101), "CUDA_ERROR_INVALID_DEVICE");
  EXPECT_STREQ(CudaErrorName(201), "CUDA_ERROR_INVALID_CONTEXT");
  EXPECT_STREQ(CudaErrorName(400), "CUDA_ERROR_INVALID_HANDLE");
  EXPECT_STREQ(CudaErrorName(700), "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_STREQ(CudaErrorName(999), "CUDA_ERROR_UNKNOWN");
  EXPECT_EQ(CudaErrorName(12345), nullptr);
  EXPECT_EQ(CudaErrorName(-1), nullptr);
  EXPECT_EQ(CudaErrorString(12345), "error 12345");
  EXPECT_EQ(CudaErrorString(2), "CUDA_ERROR_OUT_OF_MEMORY");
}

}  // namespace
}  // namespace cumemtrace::analyzer
