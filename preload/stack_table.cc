#include "preload/stack_table.h"

namespace cumemtrace::preload {
namespace {

inline uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x7f4a7c159e3779b9ull + (a << 6) + (a >> 2));
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return h;
}

uint64_t HashStack(const uintptr_t* pcs, int count) {
  uint64_t h = static_cast<uint64_t>(count);
  for (int i = 0; i < count; ++i) h = Mix(h, pcs[i]);
  return h;
}

}  // namespace

uint64_t StackTable::Find(const MappedArray<Slot>& table, uint64_t a, uint64_t b) {
  if (table.size() == 0) return 0;
  size_t mask = table.size() - 1;
  for (size_t i = Mix(a, b) & mask;; i = (i + 1) & mask) {
    const Slot& s = table[i];
    if (s.id == 0) return 0;
    if (s.key_a == a && s.key_b == b) return s.id;
  }
}

bool StackTable::Grow(MappedArray<Slot>& table, size_t used) {
  size_t old_size = table.size();
  if (old_size != 0 && (used + 1) * 2 <= old_size) return true;
  MappedArray<Slot> bigger;
  if (!bigger.Resize(old_size == 0 ? 4096 : old_size * 2)) return false;
  size_t mask = bigger.size() - 1;
  for (size_t j = 0; j < old_size; ++j) {
    const Slot& s = table[j];
    if (s.id == 0) continue;
    size_t i = Mix(s.key_a, s.key_b) & mask;
    while (bigger[i].id != 0) i = (i + 1) & mask;
    bigger[i] = s;
  }
  table.Release();
  table = bigger;
  return true;
}

bool StackTable::Insert(MappedArray<Slot>& table, size_t* used, uint64_t a, uint64_t b, uint64_t id) {
  if (!Grow(table, *used)) return false;
  size_t mask = table.size() - 1;
  size_t i = Mix(a, b) & mask;
  while (table[i].id != 0) i = (i + 1) & mask;
  table[i] = Slot{a, b, id};
  ++*used;
  return true;
}

uint64_t StackTable::InternNode(uint64_t parent, uint64_t pc) {
  uint64_t id = Find(node_index_, parent, pc);
  if (id != 0) return id;
  if (!nodes_.Push(Node{parent, pc})) return 0;
  id = nodes_.size();
  if (!Insert(node_index_, &node_index_used_, parent, pc, id)) return 0;
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
  uint64_t cached = Find(stack_cache_, hash, static_cast<uint64_t>(count));
  if (cached != 0 && Matches(cached, pcs, count)) return cached;

  uint64_t id = 0;
  for (int i = count - 1; i >= 0; --i) {
    id = InternNode(id, pcs[i]);
    if (id == 0) return 0;
  }
  // A hash collision with a different stack keeps the first one cached; the second one just takes the slow path.
  if (cached == 0) Insert(stack_cache_, &stack_cache_used_, hash, static_cast<uint64_t>(count), id);
  return id;
}

void StackTable::Reset() {
  nodes_.Release();
  node_index_.Release();
  stack_cache_.Release();
  node_index_used_ = stack_cache_used_ = 0;
  first_pending_ = 1;
}

}  // namespace cumemtrace::preload
