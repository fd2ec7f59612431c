// Whether autograd was recording when PyTorch's allocator handed out a block: the fact behind "this evaluation loop
// keeps the graph alive, wrap it in torch.no_grad()". Read from outside, with no change to the program, by calling
// the one function PyTorch itself uses to answer it: `c10::GradMode::is_enabled()`, exported by libc10.so (C10_API,
// unchanged since PyTorch 1.0). It reads autograd's thread-local state of the calling thread, which is the thread
// that asked for the block: the tracker's callback runs on it. Inference mode turns grad mode off, so one call
// answers for both `torch.no_grad()` and `torch.inference_mode()`.
//
// Verified at attach: the symbol must be a function of libc10.so, the library libc10_cuda.so sits beside, and its
// first answer must be a bool (0 or 1). Otherwise every block stays TORCH_ALLOC (grad mode unknown), with one
// Notice saying why: never a guess.
#ifndef CUMEMTRACE_PRELOAD_TORCH_GRAD_MODE_H_
#define CUMEMTRACE_PRELOAD_TORCH_GRAD_MODE_H_

#include "proto/format.h"

namespace cumemtrace::preload {

// Looks up c10::GradMode::is_enabled() in the loaded libc10.so whose folder is `c10_cuda_path`'s. Called once, by
// the tracker's attach, outside every lock of the recorder.
void LearnGradMode(const char* c10_cuda_path);

// The api of a block handed out now on this thread: TORCH_ALLOC_GRAD, TORCH_ALLOC_NO_GRAD, or TORCH_ALLOC when the
// grad mode cannot be asked. One call into libc10 (a thread-local read) when known.
format::Api TorchAllocApi();

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_TORCH_GRAD_MODE_H_
