// An open-addressing hash index from a pair of 64-bit keys to a non-zero id, on mmap'ed memory (never the program's
// heap). The preload's interning tables (stack nodes, whole stacks, Python frames) each keep one or two. Not
// thread-safe: the recorder uses them under its lock. Ids are never removed; Reset drops everything.
#ifndef CUMEMTRACE_PRELOAD_PAIR_INDEX_H_
#define CUMEMTRACE_PRELOAD_PAIR_INDEX_H_

#include <stddef.h>
#include <stdint.h>

#include "preload/mapped_array.h"

namespace cumemtrace::preload {

// Mixes two keys into a well-spread hash (also used to hash whole stacks, key by key).
inline uint64_t MixKeys(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x7f4a7c159e3779b9ull + (a << 6) + (a >> 2));
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return h;
}

class PairIndex {
 public:
  // The id stored for (a, b), 0 when there is none.
  uint64_t Find(uint64_t a, uint64_t b) const;
  // Stores (a, b) -> id (id != 0; (a, b) must not be stored yet). False when memory ran out.
  bool Insert(uint64_t a, uint64_t b, uint64_t id);
  void Reset();

 private:
  struct Slot {
    uint64_t a;
    uint64_t b;
    uint64_t id;  // 0 = empty
  };
  bool Grow();

  MappedArray<Slot> slots_;
  size_t used_ = 0;
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_PAIR_INDEX_H_
