// PyTorch's caching allocator, reached from outside through its trace tracker, so that a trace holds every block
// (tensor) the allocator carves out of the segments the driver hooks count, with no change to the program.
//
// How (facts measured on torch 2.11 and read in PyTorch's sources; docs/design.md has them): libc10_cuda.so exports
// one data symbol of its allocator, `c10::cuda::CUDACachingAllocator::allocator` (a std::atomic<CUDAAllocator*>),
// and keeps a full .symtab. There, by name: NativeCachingAllocator's `attachAllocatorTraceTracker(std::function<void
// (const TraceEntry&)>)` and NativeCachingAllocator's vtable. The live object must have exactly that vtable, and the
// vtable must hold that method; the method is then called with a std::function laid out as libstdc++ lays it out
// (stored functor, manager, invoker) whose manager counts the copies PyTorch makes, one per device allocator. The
// first trace entry must describe the very segment whose allocation triggered the attach, which proves the entry
// layout (action, device, address, stream, size at the offsets PyTorch has used since 2.2) before anything is kept.
//
// When: inside the allocator's own first segment allocation (a driver allocation with libc10_cuda.so on its stack),
// so that segment and every block after it reach the tracker: no block predates it.
//
// Never: call into PyTorch other than that one method and c10::GradMode::is_enabled() (torch_grad_mode.h: a
// thread-local read), take the GIL, throw, or call the attach of any other allocator class (cudaMallocAsync's throws
// c10::Error). The callback runs with the device's allocator mutex held
// and only records. When anything does not check out, it steps aside with one Notice in the trace.
#ifndef CUMEMTRACE_PRELOAD_TORCH_TRACKER_H_
#define CUMEMTRACE_PRELOAD_TORCH_TRACKER_H_

#include <stdint.h>

#include "proto/format.h"

namespace cumemtrace::preload {

// Called by the recorder after it recorded a successful allocation `api` (sequence number `seq`) whose native stack
// is `pcs` (innermost first), outside its locks. Attaches the tracker the first time such an allocation comes from
// PyTorch's caching allocator; cheap (one atomic load) once attached or given up.
void MaybeAttachTorchTracker(format::Api api, uint64_t seq, uint64_t address, uint64_t size, const uintptr_t* pcs,
                             int depth);

// True while the tracker may still attach (not attached, not given up) and libc10_cuda.so is loaded: the recorder
// then needs a native stack of the driver's allocations even when stacks are off (CUMEMTRACE_STACK_DEPTH=0), to see
// PyTorch's allocator ask. Without PyTorch in the process no allocation needs that stack.
bool TorchTrackerMayAttach();

// At a clean end: says in the trace why there is no block layer if there is none (once). `wanted`: the setting
// CUMEMTRACE_TORCH_BLOCKS was not 0.
void NoteTorchTrackerAtEnd(bool wanted);

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_TORCH_TRACKER_H_
