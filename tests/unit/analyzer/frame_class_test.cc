// The user-frame classification as a table: each row a path someone will meet in a real trace and the class a
// person would give it. The table is the oracle; frame_class.cc must agree with it row by row.
#include "analyzer/model/stacks/frame_class.h"

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

struct Row {
  FrameKind kind;
  const char* path;
  FrameClass expected;
};

constexpr char kPythonExe[] = "/usr/bin/python3.12";

TEST(FrameClass, PythonFrames) {
  const Row rows[] = {
      {FrameKind::kPython, "/home/u/proj/train.py", FrameClass::kUser},
      {FrameKind::kPython, "train.py", FrameClass::kUser},
      {FrameKind::kPython, "/home/u/proj/models/resnet.py", FrameClass::kUser},
      {FrameKind::kPython, "<stdin>", FrameClass::kUser},
      {FrameKind::kPython, "<string>", FrameClass::kUser},
      {FrameKind::kPython, "/usr/lib/python3.12/threading.py", FrameClass::kLibrary},
      {FrameKind::kPython, "/opt/conda/lib/python3.11/multiprocessing/queues.py", FrameClass::kLibrary},
      {FrameKind::kPython, "/usr/lib64/python3.9/runpy.py", FrameClass::kLibrary},
      {FrameKind::kPython, "<frozen importlib._bootstrap>", FrameClass::kLibrary},
      {FrameKind::kPython, "<frozen runpy>", FrameClass::kLibrary},
      {FrameKind::kPython, "/home/u/venv/lib/python3.12/site-packages/torch/nn/modules/module.py",
       FrameClass::kLibrary},
      {FrameKind::kPython, "/usr/lib/python3/dist-packages/numpy/core/numeric.py", FrameClass::kLibrary},
      {FrameKind::kPython, "<eval_with_key>.3", FrameClass::kLibrary},
      // A project directory that merely contains "python" in its name is still the user's.
      {FrameKind::kPython, "/home/u/python-tools/train.py", FrameClass::kUser},
      {FrameKind::kNoPython, "", FrameClass::kMarker},
  };
  for (const Row& r : rows) EXPECT_EQ(ClassifyFrame(r.kind, r.path, kPythonExe), r.expected) << r.path;
}

TEST(FrameClass, NativeModules) {
  const Row rows[] = {
      {FrameKind::kNative, "/home/u/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so",
       FrameClass::kLibrary},
      {FrameKind::kNative, "/opt/pytorch/lib/libtorch_cuda.so", FrameClass::kLibrary},
      {FrameKind::kNative, "/usr/local/cuda-13.0/lib64/libcudart.so.13", FrameClass::kRuntime},
      {FrameKind::kNative, "/usr/lib/x86_64-linux-gnu/libcudart.so.13", FrameClass::kRuntime},
      {FrameKind::kNative, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", FrameClass::kRuntime},
      {FrameKind::kNative, "/usr/lib/x86_64-linux-gnu/libc.so.6", FrameClass::kRuntime},
      {FrameKind::kNative, "/lib64/ld-linux-x86-64.so.2", FrameClass::kRuntime},
      {FrameKind::kNative, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", FrameClass::kRuntime},
      {FrameKind::kNative, "/opt/cumemtrace/lib/libcumemtrace.so", FrameClass::kRuntime},
      {FrameKind::kNative, "/home/u/venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.13",
       FrameClass::kLibrary},
      {FrameKind::kNative, "/usr/local/cuda/lib64/libcublas.so.13", FrameClass::kLibrary},
      {FrameKind::kNative, "/usr/lib/x86_64-linux-gnu/libz.so.1", FrameClass::kLibrary},
      {FrameKind::kNative, "/usr/bin/python3.12", FrameClass::kLibrary},  // the interpreter, even as executable
      {FrameKind::kNative, "/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0", FrameClass::kLibrary},
      {FrameKind::kNative, "/usr/lib/python3.12/lib-dynload/_ctypes.cpython-312-x86_64-linux-gnu.so",
       FrameClass::kLibrary},
      {FrameKind::kNative, "/home/u/proj/build/libmykernels.so", FrameClass::kUser},
      {FrameKind::kNative, "", FrameClass::kLibrary},  // no known module
  };
  for (const Row& r : rows) EXPECT_EQ(ClassifyFrame(r.kind, r.path, kPythonExe), r.expected) << r.path;
}

TEST(FrameClass, TheProgramsOwnExecutableIsUserCode) {
  // A C++ program: its executable is user code wherever it lives; the same path is a system binary otherwise.
  EXPECT_EQ(ClassifyFrame(FrameKind::kNative, "/home/u/proj/build/trainer", "/home/u/proj/build/trainer"),
            FrameClass::kUser);
  EXPECT_EQ(ClassifyFrame(FrameKind::kNative, "/usr/local/bin/leaky", "/usr/local/bin/leaky"), FrameClass::kUser);
  EXPECT_EQ(ClassifyFrame(FrameKind::kNative, "/usr/local/bin/leaky", "/usr/bin/python3"), FrameClass::kLibrary);
  EXPECT_EQ(ClassifyFrame(FrameKind::kNative, "/usr/lib/x86_64-linux-gnu/libc.so.6",
                          "/usr/lib/x86_64-linux-gnu/libc.so.6"),
            FrameClass::kRuntime);
}

TEST(FrameClass, AStaticCudaRuntimeInsideTheExecutableIsRuntime) {
  // nvcc's default `-cudart static`: the runtime's frames lie in the program's own executable (examples/leaky).
  constexpr char kExe[] = "/tmp/work/leaky";
  EXPECT_EQ(ClassifyFrame(FrameKind::kNative, kExe, kExe, "libcudart_static_5382377d5c772c9d197c0cda9fd9742ee6ad893c"),
            FrameClass::kRuntime);
  EXPECT_EQ(ClassifyFrame(FrameKind::kNative, kExe, kExe, "cudaMalloc"), FrameClass::kRuntime);
  EXPECT_EQ(ClassifyFrame(FrameKind::kNative, kExe, kExe, "cuMemAlloc_v2"), FrameClass::kRuntime);
  EXPECT_EQ(ClassifyFrame(FrameKind::kNative, kExe, kExe, "_start"), FrameClass::kRuntime);
  EXPECT_EQ(ClassifyFrame(FrameKind::kNative, kExe, kExe, "leak_scratch(void**)"), FrameClass::kUser);
  EXPECT_EQ(ClassifyFrame(FrameKind::kNative, kExe, kExe, "main"), FrameClass::kUser);
  EXPECT_EQ(ClassifyFrame(FrameKind::kNative, kExe, kExe, "cube_root(double)"), FrameClass::kUser);
}

TEST(FrameClass, ShortPathKeepsWhatFollowsThePackagesDirectory) {
  EXPECT_EQ(ShortPath("/home/u/venv/lib/python3.12/site-packages/torch/nn/modules/module.py"),
            "torch/nn/modules/module.py");
  EXPECT_EQ(ShortPath("/usr/lib/python3/dist-packages/numpy/core/numeric.py"), "numpy/core/numeric.py");
  // The last one counts (a venv inside a package tree).
  EXPECT_EQ(ShortPath("/a/site-packages/x/dist-packages/y.py"), "y.py");
  EXPECT_EQ(ShortPath("/home/u/proj/train.py"), "/home/u/proj/train.py");
  EXPECT_EQ(ShortPath("<frozen importlib._bootstrap>"), "<frozen importlib._bootstrap>");
}

}  // namespace
}  // namespace cumemtrace::analyzer
