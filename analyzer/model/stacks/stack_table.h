// The interned stacks of a trace: a prefix tree of nodes (id -> parent, pc) as StackNodes packets deliver them.
// Memory grows with unique nodes, never with events. Walking a stack is bounded, so a damaged tree (a cycle, a
// missing parent) ends the walk instead of looping.
#ifndef CUMEMTRACE_ANALYZER_MODEL_STACKS_STACK_TABLE_H_
#define CUMEMTRACE_ANALYZER_MODEL_STACKS_STACK_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

class StackTable {
 public:
  static constexpr size_t kMaxDepth = 4096;

  void Add(const StackNode& node);
  // The pcs of stack `id`, innermost first (empty for 0 or an unknown id), at most `max_frames` of them.
  std::vector<uint64_t> Pcs(uint64_t id, size_t max_frames = kMaxDepth) const;
  // Number of frames in stack `id` (bounded by kMaxDepth).
  size_t Depth(uint64_t id) const;
  size_t size() const { return count_; }

 private:
  struct Node {
    uint64_t parent = 0;
    uint64_t pc = 0;
    bool present = false;
  };
  const Node* Find(uint64_t id) const;

  // Ids are consecutive from 1 in a well-formed trace: dense_[id] holds them; anything else goes to sparse_.
  std::vector<Node> dense_;
  absl::flat_hash_map<uint64_t, Node> sparse_;
  size_t count_ = 0;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_STACKS_STACK_TABLE_H_
