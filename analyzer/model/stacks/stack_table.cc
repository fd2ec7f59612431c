// The stack prefix tree. Must never loop on a damaged tree: walks stop at kMaxDepth or an unknown node.
#include "analyzer/model/stacks/stack_table.h"

namespace cumemtrace::analyzer {

void StackTable::Add(const StackNode& node) {
  if (node.id == 0) return;  // 0 is the root, never a node
  if (dense_.empty()) dense_.push_back(Node{});  // slot 0
  Node value{node.parent, node.pc, true};
  if (node.id < dense_.size()) {
    count_ += !dense_[node.id].present;
    dense_[node.id] = value;
  } else if (node.id == dense_.size() && sparse_.empty()) {
    dense_.push_back(value);
    ++count_;
  } else {
    auto [it, inserted] = sparse_.insert_or_assign(node.id, value);
    (void)it;
    count_ += inserted;
  }
}

const StackTable::Node* StackTable::Find(uint64_t id) const {
  if (id < dense_.size()) return dense_[id].present ? &dense_[id] : nullptr;
  if (sparse_.empty()) return nullptr;
  auto it = sparse_.find(id);
  return it == sparse_.end() ? nullptr : &it->second;
}

std::vector<uint64_t> StackTable::Pcs(uint64_t id, size_t max_frames) const {
  std::vector<uint64_t> pcs;
  for (size_t depth = 0; id != 0 && depth < kMaxDepth && pcs.size() < max_frames; ++depth) {
    const Node* node = Find(id);
    if (node == nullptr) break;
    pcs.push_back(node->pc);
    id = node->parent;
  }
  return pcs;
}

size_t StackTable::Depth(uint64_t id) const {
  size_t depth = 0;
  for (; id != 0 && depth < kMaxDepth; ++depth) {
    const Node* node = Find(id);
    if (node == nullptr) break;
    id = node->parent;
  }
  return depth;
}

}  // namespace cumemtrace::analyzer
