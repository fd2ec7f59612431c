// End-to-end test program (d): the shared CUDA runtime. Linked against libcudart.so.13 only (never libcuda), it
// makes runtime memory calls, as PyTorch's caching allocator and pinned-memory thread do. The runtime reaches the
// driver through cuGetProcAddress underneath; cumemtrace must record one event per runtime call, labelled with the
// runtime API, and none for calls that make no driver call (cudaMalloc of 0 bytes, cudaFree(nullptr)).
#include "runtime_mix.h"

int main() {
  cumemtrace::e2e::RunRuntimeMix();
  return 0;
}
