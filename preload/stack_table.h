// Interns native stacks as a prefix tree of program counters, so an event carries one stack id and each distinct
// call path is written once (as StackNodes packets). Not thread-safe: the writer calls it under its lock (the
// recording threads only keep each stack's frames for it: output_queue.h).
//
// Two hash tables: (parent, pc) -> node for building the tree, and a whole-stack cache (hash of all pcs -> a flat
// copy of the stack and its innermost node) so that a stack seen before costs one lookup and one comparison of
// contiguous memory instead of one lookup per frame. The copy, not the tree, verifies a hit: walking a 50-frame
// path up the tree is a chain of 50 dependent loads, which made interning the preload's costliest step in time
// (perf, bench/torch_instructions.sh's workload).
#ifndef CUMEMTRACE_PRELOAD_STACK_TABLE_H_
#define CUMEMTRACE_PRELOAD_STACK_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "preload/mapped_array.h"
#include "preload/pair_index.h"

namespace cumemtrace::preload {

class StackTable {
 public:
  // Words of cached stacks kept at most (64 MiB, ~160 000 stacks of 50 frames): past that, new stacks are interned
  // frame by frame, uncached, so a program with ever new stacks cannot grow the cache without bound.
  static constexpr size_t kMaxCachedWords = size_t{8} << 20;

  constexpr explicit StackTable(size_t max_cached_words = kMaxCachedWords) : max_cached_words_(max_cached_words) {}

  // Returns the id of the innermost node of `pcs` (innermost first, `count` of them), 0 for an empty stack, or
  // 0 if memory ran out. New nodes are appended to the pending range.
  uint64_t Intern(const uintptr_t* pcs, int count);

  // Nodes [first_pending(), next_id()) have not been written yet.
  uint64_t first_pending() const { return first_pending_; }
  uint64_t next_id() const { return nodes_.size() + 1; }
  void MarkWritten() { first_pending_ = next_id(); }

  uint64_t parent(uint64_t id) const { return nodes_[id - 1].parent; }
  uint64_t pc(uint64_t id) const { return nodes_[id - 1].pc; }
  size_t node_count() const { return nodes_.size(); }

  // Drops everything (a forked child that starts a new trace).
  void Reset();

 private:
  struct Node {
    uint64_t parent;
    uint64_t pc;
  };

  uint64_t InternNode(uint64_t parent, uint64_t pc);
  void Cache(uint64_t hash, const uintptr_t* pcs, int count, uint64_t id);

  MappedArray<Node> nodes_;
  PairIndex node_index_;   // (parent, pc) -> node
  PairIndex stack_cache_;  // (hash of all pcs, frame count) -> 1 + offset of the stack's entry in cached_
  MappedArray<uint64_t> cached_;  // per cached stack: its innermost node, then its pcs
  size_t max_cached_words_;
  uint64_t first_pending_ = 1;
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_STACK_TABLE_H_
