// Which frames are the user's: the one question behind `--group-by user`. A person reading "who allocated this"
// wants the innermost line of their own code, not PyTorch's allocator or the CUDA runtime, so every frame falls in
// one of four classes, decided from its path alone (a Python frame's file, a native frame's module):
//
//   user     Python files outside site-packages/dist-packages and the standard library; native code of the
//            program's own executable (unless that is a Python interpreter) or of libraries outside system, CUDA,
//            Python, PyTorch and site-packages paths.
//   library  everything else that is code someone else wrote: the standard library, installed packages, PyTorch,
//            cuBLAS and other CUDA libraries, system libraries, the interpreter, frames of no known module.
//   runtime  the layers every allocation passes through and that say nothing about who asked: the CUDA driver and
//            runtime, libc and the loader, the C++ runtime, cumemtrace itself.
//   marker   "<no Python frames on this thread>".
//
// When a stack has no user frame, grouping falls back to its innermost frame that is not runtime or marker.
// Pure functions on strings: must never look at anything but the path (and the executable's path).
#ifndef CUMEMTRACE_ANALYZER_MODEL_STACKS_FRAME_CLASS_H_
#define CUMEMTRACE_ANALYZER_MODEL_STACKS_FRAME_CLASS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace cumemtrace::analyzer {

enum class FrameKind : uint8_t { kNative, kPython, kNoPython };

enum class FrameClass : uint8_t { kUser, kLibrary, kRuntime, kMarker };

// `path`: a Python frame's file as the interpreter had it, or a native frame's module path ("" when unknown).
// `executable`: the traced program's executable (TraceHeader::executable; "" when unknown). `function`: a native
// frame's (demangled) name when known: a program built with nvcc links the CUDA runtime into its own executable
// (`-cudart static`), so there the runtime is told apart by name (cudaMalloc, libcudart_static_..., cudart::...,
// _start), not by path.
FrameClass ClassifyFrame(FrameKind kind, absl::string_view path, absl::string_view executable,
                         absl::string_view function = "");

// The autograd node a native frame runs, from its demangled name: "MmBackward0" for
// "torch::autograd::generated::MmBackward0::apply(std::vector<...>&&)", "AccumulateGrad", "CppNode<F>" (templates
// kept whole); "" for any other frame. A backward pass's allocation has its node's frame above the kernels.
std::string AutogradNodeName(absl::string_view function);

// "user", "library", "runtime", "marker".
const char* FrameClassName(FrameClass c);

// The part of a path a person needs: what follows the last site-packages/ or dist-packages/, else the path as
// recorded. For text only; JSON keeps paths as recorded.
absl::string_view ShortPath(absl::string_view path);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_STACKS_FRAME_CLASS_H_
