#include "preload/stack_table.h"

namespace cumemtrace::preload {
namespace {

uint64_t HashStack(const uintptr_t* pcs, int count) {
  uint64_t h = static_cast<uint64_t>(count);
  for (int i = 0; i < count; ++i) h = MixKeys(h, pcs[i]);
  return h;
}

}  // namespace

uint64_t StackTable::InternNode(uint64_t parent, uint64_t pc) {
  uint64_t id = node_index_.Find(parent, pc);
  if (id != 0) return id;
  if (!nodes_.Push(Node{parent, pc})) return 0;
  id = nodes_.size();
  if (!node_index_.Insert(parent, pc, id)) return 0;
  return id;
}

bool StackTable::Matches(uint64_t id, const uintptr_t* pcs, int count) const {
  for (int i = 0; i < count; ++i) {
    if (id == 0 || pc(id) != pcs[i]) return false;
    id = parent(id);
  }
  return id == 0;
}

uint64_t StackTable::Intern(const uintptr_t* pcs, int count) {
  if (count <= 0) return 0;
  uint64_t hash = HashStack(pcs, count);
  uint64_t cached = stack_cache_.Find(hash, static_cast<uint64_t>(count));
  if (cached != 0 && Matches(cached, pcs, count)) return cached;

  uint64_t id = 0;
  for (int i = count - 1; i >= 0; --i) {
    id = InternNode(id, pcs[i]);
    if (id == 0) return 0;
  }
  // A hash collision with a different stack keeps the first one cached; the second one just takes the slow path.
  if (cached == 0) stack_cache_.Insert(hash, static_cast<uint64_t>(count), id);
  return id;
}

void StackTable::Reset() {
  nodes_.Release();
  node_index_.Reset();
  stack_cache_.Reset();
  first_pending_ = 1;
}

}  // namespace cumemtrace::preload
