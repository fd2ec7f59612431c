// A growing array whose elements never move: chunks of a power-of-two count, found by a shift and a mask.
//
// Why not std::deque: it also keeps its elements in place, but libstdc++ sizes its chunks to 512 bytes, so for
// elements whose size is not a power of two it finds one with a division by the count per chunk; the allocator
// layer reaches a block node this way several times per PyTorch event (docs/performance.md, "Reading a trace").
// Why not std::vector: callers hold references to elements while adding others.
#ifndef CUMEMTRACE_ANALYZER_MODEL_CHUNKED_VECTOR_H_
#define CUMEMTRACE_ANALYZER_MODEL_CHUNKED_VECTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace cumemtrace::analyzer {

template <typename T, int kChunkBits = 8>
class ChunkedVector {
 public:
  static constexpr size_t kChunk = size_t{1} << kChunkBits;

  T& operator[](size_t i) { return chunks_[i >> kChunkBits][i & (kChunk - 1)]; }
  const T& operator[](size_t i) const { return chunks_[i >> kChunkBits][i & (kChunk - 1)]; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Appends a value-initialized element (its chunk was value-initialized when made) and returns it; no element
  // moves.
  T& emplace_back() {
    if ((size_ >> kChunkBits) == chunks_.size()) chunks_.push_back(std::make_unique<T[]>(kChunk));
    return (*this)[size_++];
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_CHUNKED_VECTOR_H_
