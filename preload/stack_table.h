// Interns native stacks as a prefix tree of program counters, so an event carries one stack id and each distinct
// call path is written once (as StackNodes packets). Not thread-safe: the recorder calls it under its lock.
//
// Two hash tables: (parent, pc) -> node for building the tree, and a whole-stack cache (hash of all pcs -> innermost
// node, verified by walking the tree) so that a stack seen before costs one lookup instead of one per frame.
#ifndef CUMEMTRACE_PRELOAD_STACK_TABLE_H_
#define CUMEMTRACE_PRELOAD_STACK_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "preload/mapped_array.h"
#include "preload/pair_index.h"

namespace cumemtrace::preload {

class StackTable {
 public:
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
  bool Matches(uint64_t id, const uintptr_t* pcs, int count) const;

  MappedArray<Node> nodes_;
  PairIndex node_index_;   // (parent, pc) -> node
  PairIndex stack_cache_;  // (hash of all pcs, frame count) -> innermost node, verified by Matches
  uint64_t first_pending_ = 1;
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_STACK_TABLE_H_
